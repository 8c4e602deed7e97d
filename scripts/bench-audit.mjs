/**
 * Audit-log latency (not a test): how long after a mutation's response its entry is in the audit
 * log, over 1,000 mutations through the gateway. The path: notes-tasks' outbox → relay → audit
 * topic (the real broker when KAFKA_BROKERS is set) → identity's consumer → audit_log.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-audit.mjs
 *   (WORKAUTO_KAFKA=off measures the in-process transport of make dev instead)
 *
 * A poller reads identity's audit_log every 2 ms and notes when each resource's entry appears, so
 * each number is an upper bound by at most the poll interval plus one query.
 * Env: CHANGES (1000), CONCURRENCY (4).
 */
import pg from 'pg';
import { startBenchStack, summarize } from './lib-bench.mjs';

const CHANGES = Number(process.env.CHANGES ?? 1_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 4);

const { stack, api, createTenant, databaseUrl } = await startBenchStack();
const audit = new pg.Client({ connectionString: databaseUrl('identity') });
await audit.connect();
try {
  const tenant = await createTenant();
  const key = tenant.api_key;
  const answered = new Map(); // note id → when its POST answered
  const seen = new Map(); // note id → when its entry was first read
  let polling = true;
  let since = new Date(0);
  const poller = (async () => {
    while (polling) {
      const { rows } = await audit.query(
        `SELECT resource_id, created_at FROM audit_log WHERE tenant_id = $1 AND action = 'note.created' AND created_at >= $2`,
        [tenant.tenant.id, since],
      );
      const now = performance.now();
      for (const r of rows) if (!seen.has(r.resource_id)) seen.set(r.resource_id, now);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  since = new Date();
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < CHANGES) {
        const i = next++;
        const note = await api('POST', '/api/v1/notes', key, { title: `change ${i}`, body: 'audited' });
        answered.set(note.id, performance.now());
      }
    }),
  );
  const wall = performance.now() - started;
  const deadline = performance.now() + 30_000;
  while (seen.size < CHANGES && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  polling = false;
  await poller;
  if (seen.size < CHANGES) throw new Error(`only ${seen.size} of ${CHANGES} entries arrived within 30 s`);
  const lag = [...answered].map(([id, t]) => Math.max(0, seen.get(id) - t));
  console.log(`transport: ${process.env.KAFKA_BROKERS ? `Kafka at ${process.env.KAFKA_BROKERS}` : 'in-process'}`);
  console.log(`${CHANGES} note creations through the gateway (${CONCURRENCY} at a time, ${((CHANGES / wall) * 1000).toFixed(0)} per s)`);
  console.log(`response → audit-log entry: ${summarize(lag)}`);
} finally {
  await audit.end().catch(() => undefined);
  await stack.stop();
}
