/**
 * Benchmark of GET /api/v1/pipelines/{id}/summary through the gateway (not a test).
 *
 * Seeds one tenant with a pipeline of 10 stages (through the API) and 100,000 deals (bulk SQL
 * INSERT … SELECT generate_series into crm-pipelines' own tables: mixed amounts, a third without
 * a confidence, 5 % soft-deleted), then times sequential summary requests over real HTTP → gRPC →
 * PostgreSQL and prints p50/p99 and the query plan.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-summary.mjs
 *   (or `make bench`; WORKAUTO_KAFKA=off skips the broker, which this benchmark does not need)
 *
 * Env: DEALS (100000), REQUESTS (200), WARMUP (20). Needs TEST_DATABASE_URL (with-infra sets it).
 */
import pg from 'pg';
import { startBenchStack, summarize } from './lib-bench.mjs';

const DEALS = Number(process.env.DEALS ?? 100_000);
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
    stages: types.map((stage_type, i) => ({ name: `Stage ${i + 1}`, stage_type, ...(i % 3 === 2 ? {} : { default_confidence: (i + 1) / 10 }) })),
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

  const expected = await db.query(
    `SELECT count(*)::int AS n, sum(amount)::text AS total FROM deals WHERE pipeline_id = $1 AND deleted_at IS NULL`,
    [pipeline.id],
  );
  const path = `/api/v1/pipelines/${pipeline.id}/summary`;
  const first = await api('GET', path, key);
  if (first.total_deals !== expected.rows[0].n || first.total_value !== Number(expected.rows[0].total)) {
    throw new Error(`summary disagrees with SQL: ${JSON.stringify({ api: [first.total_deals, first.total_value], sql: expected.rows[0] })}`);
  }
  console.log(`summary: ${first.total_deals} live deals, total ${first.total_value}, weighted ${first.weighted_value}, ${first.stages.length} stages`);

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

  const plan = await db.query(
    `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
     SELECT d.stage_id, count(*), sum(d.amount), sum(d.amount * d.confidence), sum(d.amount) FILTER (WHERE d.confidence IS NULL)
       FROM deals d WHERE d.tenant_id = $1 AND d.pipeline_id = $2 AND d.deleted_at IS NULL GROUP BY d.stage_id`,
    [tenant.tenant.id, pipeline.id],
  );
  console.log('plan of the aggregation:');
  for (const row of plan.rows) console.log(`  ${row['QUERY PLAN']}`);
} finally {
  await db.end().catch(() => undefined);
  await stack.stop();
}
