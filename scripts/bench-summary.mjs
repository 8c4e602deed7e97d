/**
 * Benchmark of GET /api/v1/pipelines/{id}/summary through the gateway (not a test), and of 32
 * concurrent deal moves (PATCH /deals/{id} with another stage_id), whose writes keep the summary's
 * aggregates.
 *
 * Seeds one tenant with a pipeline of 10 stages (through the API) and 1,000,000 deals (bulk SQL
 * INSERT … SELECT generate_series into crm-pipelines' own tables: mixed amounts, a third without
 * a confidence, 5 % soft-deleted), then times sequential summary requests over real HTTP → gRPC →
 * PostgreSQL and prints p50/p99 and the query plan; then MOVERS clients move random deals between
 * the open stages for MOVE_SECONDS and the summary is checked against SQL over the deals again.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-summary.mjs
 *   (or `make bench`; WORKAUTO_KAFKA=off skips the broker, which this benchmark does not need)
 *
 * Env: DEALS (1000000), REQUESTS (200), WARMUP (20), MOVERS (32), MOVE_SECONDS (10). Needs
 * TEST_DATABASE_URL (with-infra sets it).
 */
import pg from 'pg';
import { percentile, report, startBenchStack, summarize } from './lib-bench.mjs';

const DEALS = Number(process.env.DEALS ?? 1_000_000);
const MOVERS = Number(process.env.MOVERS ?? 32);
const MOVE_SECONDS = Number(process.env.MOVE_SECONDS ?? 10);
const REQUESTS = Number(process.env.REQUESTS ?? 200);
const WARMUP = Number(process.env.WARMUP ?? 20);

const { stack, api, createTenant, databaseUrl } = await startBenchStack();
const crmUrl = databaseUrl('crm_pipelines');

const db = new pg.Client({ connectionString: crmUrl });
try {
  const tenant = await createTenant();
  const key = tenant.api_key;
  const types = ['open', 'open', 'open', 'open', 'open', 'open', 'open', 'open', 'won', 'lost'];
  const pipeline = await api('POST', '/api/v1/pipelines', key, {
    name: 'Bench pipeline',
    stages: types.map((stage_type, i) => ({
      name: `Stage ${i + 1}`,
      stage_type,
      ...(i % 3 === 2 ? {} : { default_confidence: (i + 1) / 10 }),
    })),
  });

  await db.connect();
  let t0 = performance.now();
  await db.query(
    `INSERT INTO deals (id, tenant_id, pipeline_id, stage_id, title, amount, currency, confidence, owner_id, created_at, updated_at, deleted_at)
     SELECT gen_random_uuid(), $1, $2, ($3::uuid[])[1 + (i % 10)], 'Deal ' || i,
            round((random() * CASE WHEN i % 50 = 0 THEN 5000000 ELSE 50000 END)::numeric, 2), 'USD',
            CASE WHEN i % 3 = 0 THEN NULL ELSE round(random()::numeric, 4) END,
            $4, now() - i * interval '1 minute', now(), CASE WHEN i % 20 = 0 THEN now() END
       FROM generate_series(1, $5::int) AS i`,
    [tenant.tenant.id, pipeline.id, pipeline.stages.map((s) => s.id), tenant.member.id, DEALS],
  );
  // The creation row of each deal's history, as the API writes it.
  await db.query(
    `INSERT INTO deal_stage_history (id, tenant_id, deal_id, seq, to_stage_id, to_stage_name, amount_at_change, confidence_at_change, changed_at)
     SELECT gen_random_uuid(), d.tenant_id, d.id, 1, d.stage_id, s.name, d.amount, d.confidence, d.created_at
       FROM deals d JOIN pipeline_stages s ON s.id = d.stage_id WHERE d.pipeline_id = $1`,
    [pipeline.id],
  );
  // What autovacuum does on a live system: statistics, and the visibility map for index-only scans.
  await db.query('VACUUM ANALYZE deals');
  console.log(`seeded ${DEALS} deals (${Math.round(performance.now() - t0)} ms)`);

  const path = `/api/v1/pipelines/${pipeline.id}/summary`;
  /** The API's summary against counts and sums straight over the deals, per stage. */
  async function checkAgainstSql() {
    const { rows } = await db.query(
      `SELECT stage_id, count(*)::int AS n, round(sum(amount), 2)::text AS total FROM deals WHERE pipeline_id = $1 AND deleted_at IS NULL GROUP BY stage_id`,
      [pipeline.id],
    );
    const got = await api('GET', path, key);
    const sql = new Map(rows.map((r) => [r.stage_id, r]));
    for (const s of got.stages) {
      const e = sql.get(s.stage_id) ?? { n: 0, total: '0' };
      if (s.deal_count !== e.n || s.total_value !== Number(e.total))
        throw new Error(
          `summary disagrees with SQL in ${s.stage_name}: ${JSON.stringify({ api: [s.deal_count, s.total_value], sql: e })}`,
        );
    }
    return got;
  }
  const first = await checkAgainstSql();
  console.log(
    `summary: ${first.total_deals} live deals, total ${first.total_value}, weighted ${first.weighted_value}, ${first.stages.length} stages`,
  );

  for (let i = 0; i < WARMUP; i++) await api('GET', path, key);
  const ms = [];
  t0 = performance.now();
  for (let i = 0; i < REQUESTS; i++) {
    const started = performance.now();
    await api('GET', path, key);
    ms.push(performance.now() - started);
  }
  const wall = performance.now() - t0;
  console.log(`GET ${path.replace(pipeline.id, '{id}')} × ${REQUESTS} (sequential, after ${WARMUP} warm-up):`);
  console.log(`  ${summarize(ms)}   ${((REQUESTS / wall) * 1000).toFixed(1)} req/s`);
  ms.sort((a, b) => a - b);
  report(
    'summary_p99',
    `pipeline summary p99, ${DEALS.toLocaleString('en')} deals, through the gateway`,
    percentile(ms, 99),
    'ms',
    { value: 50, better: 'lower' },
  );

  // Concurrent deal moves: each moves one random live deal to another open stage, MOVERS at a time.
  const { rows: movable } = await db.query(
    `SELECT id FROM deals WHERE pipeline_id = $1 AND deleted_at IS NULL ORDER BY random() LIMIT 5000`,
    [pipeline.id],
  );
  const openStages = pipeline.stages
    .filter((s) => s.stage_type === 'STAGE_TYPE_OPEN' || s.stage_type === 'open')
    .map((s) => s.id);
  async function moveDeals() {
    const moves = [];
    let failed = 0;
    const until = performance.now() + MOVE_SECONDS * 1000;
    await Promise.all(
      Array.from({ length: MOVERS }, async () => {
        while (performance.now() < until) {
          const deal = movable[Math.floor(Math.random() * movable.length)].id;
          const stage = openStages[Math.floor(Math.random() * openStages.length)];
          const started = performance.now();
          try {
            await api('PATCH', `/api/v1/deals/${deal}`, key, { stage_id: stage });
            moves.push(performance.now() - started);
          } catch (err) {
            failed++;
            if (failed <= 3) console.log(`  move failed: ${err.message}`);
          }
        }
      }),
    );
    if (failed) throw new Error(`${failed} deal moves failed`);
    return moves.sort((a, b) => a - b);
  }
  // Side by side in this sitting: the moves without keeping the aggregates (their trigger off, as
  // before the aggregates existed), then with it; then the aggregates are rebuilt from the deals.
  await db.query('ALTER TABLE deals DISABLE TRIGGER deals_totals_update');
  const without = await moveDeals();
  await db.query('ALTER TABLE deals ENABLE TRIGGER deals_totals_update');
  await db.query('SELECT stage_deal_totals_rebuild()');
  const moves = await moveDeals();
  console.log(`${MOVERS} concurrent deal moves for ${MOVE_SECONDS} s each, through the gateway:`);
  console.log(
    `  without the aggregates: ${without.length} moves (${(without.length / MOVE_SECONDS).toFixed(0)}/s)   ${summarize(without)}`,
  );
  console.log(
    `  keeping the aggregates: ${moves.length} moves (${(moves.length / MOVE_SECONDS).toFixed(0)}/s)   ${summarize(moves)}`,
  );
  report(
    'deal_moves_rate',
    `deal moves/s, ${MOVERS} concurrent, keeping the summary's aggregates`,
    moves.length / MOVE_SECONDS,
    '/s',
  );
  report(
    'deal_moves_rate_without_aggregates',
    `deal moves/s, ${MOVERS} concurrent, without keeping the aggregates (trigger off)`,
    without.length / MOVE_SECONDS,
    '/s',
  );
  report('deal_moves_p99', `deal move p99, ${MOVERS} concurrent, keeping the aggregates`, percentile(moves, 99), 'ms');
  report(
    'deal_moves_p99_without_aggregates',
    `deal move p99, ${MOVERS} concurrent, without keeping the aggregates (trigger off)`,
    percentile(without, 99),
    'ms',
  );
  await checkAgainstSql();
  console.log('  the summary still agrees with SQL over the deals after the moves');

  const plan = await db.query(
    `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
     SELECT t.stage_id, sum(t.deal_count), sum(t.total), sum(t.with_own), sum(t.without_own)
       FROM stage_deal_totals t WHERE t.tenant_id = $1 AND t.pipeline_id = $2 GROUP BY t.stage_id`,
    [tenant.tenant.id, pipeline.id],
  );
  console.log('plan of the aggregation:');
  for (const row of plan.rows) console.log(`  ${row['QUERY PLAN']}`);
} finally {
  await db.end().catch(() => undefined);
  await stack.stop();
}
