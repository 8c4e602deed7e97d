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
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { ensureDatabase } from '@workauto/db';
import { LocalTransport } from '@workauto/events';
import { createLogger } from '@workauto/logger';
import { createIdentityService } from '@workauto/identity';
import { createCrmPipelinesService } from '@workauto/crm-pipelines';
import { createGateway } from '@workauto/gateway';

const DEALS = Number(process.env.DEALS ?? 100_000);
const REQUESTS = Number(process.env.REQUESTS ?? 200);
const WARMUP = Number(process.env.WARMUP ?? 20);
const server = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!server) {
  console.error('TEST_DATABASE_URL is not set: run through deploy/embedded/dist/with-infra.js (see the header)');
  process.exit(2);
}

// The product's composition (as deploy/embedded/src/stack.ts): identity for auth, crm-pipelines, the gateway.
const logger = createLogger('bench', 'warn');
const prefix = `bench_${randomBytes(4).toString('hex')}`;
const transport = new LocalTransport();
const adminToken = `bench-admin-${randomBytes(24).toString('hex')}`;
const identity = await createIdentityService(
  { databaseUrl: await ensureDatabase(server, `${prefix}_identity`), host: '127.0.0.1', port: 0, platformAdminToken: adminToken, encryptionKeys: Keyring.generateSpec(), transport },
  logger,
);
const crmUrl = await ensureDatabase(server, `${prefix}_crm_pipelines`);
const crm = await createCrmPipelinesService({ databaseUrl: crmUrl, host: '127.0.0.1', port: 0, transport }, logger);
const gateway = await createGateway({
  logger,
  downstreams: { identity: `127.0.0.1:${identity.port}`, crm_pipelines: `127.0.0.1:${crm.port}` },
  rateLimitPerMinute: 1_000_000,
});
const base = `http://127.0.0.1:${await gateway.listen('127.0.0.1', 0)}`;

async function api(method, path, key, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const db = new pg.Client({ connectionString: crmUrl });
try {
  const tenant = await api('POST', '/api/v1/admin/tenants', adminToken, { name: 'Bench', owner: { name: 'Owner', email: 'owner@bench.test' } });
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
  ms.sort((x, y) => x - y);
  const pct = (p) => ms[Math.min(ms.length - 1, Math.ceil((p / 100) * ms.length) - 1)];
  const fmt = (v) => v.toFixed(1);
  console.log(`GET ${path.replace(pipeline.id, '{id}')} × ${REQUESTS} (sequential, after ${WARMUP} warm-up):`);
  console.log(`  p50 ${fmt(pct(50))} ms   p90 ${fmt(pct(90))} ms   p99 ${fmt(pct(99))} ms   min ${fmt(ms[0])} ms   max ${fmt(ms[ms.length - 1])} ms   ${fmt((REQUESTS / wall) * 1000)} req/s`);

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
  await gateway.close();
  await crm.stop();
  await identity.stop();
  await transport.close();
}
