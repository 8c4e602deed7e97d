/**
 * Audit-log latency (not a test): how long after a mutation's response its entry is in the audit
 * log, over 1,000 mutations through the gateway. The path: notes-tasks' outbox → relay → audit
 * topic (the real broker when KAFKA_BROKERS is set) → identity's consumer → audit_log.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-audit.mjs
 *   (WORKAUTO_KAFKA=off measures the in-process transport of make dev instead)
 *
 * A poller asks identity's audit_log every 2 ms for the entries still awaited and notes when each
 * appears, so each number is an upper bound by at most the poll interval plus one query.
 * Per stage (database timestamps, same host clock as the client's Date.now()): the write's
 * transaction start (outbox.created_at), the broker's acknowledgement of the relay's publish
 * (outbox.published_at, clock_timestamp() after the ack), and the poller's first sight of the entry.
 * Env: CHANGES (1000), CONCURRENCY (4), SHAPE (processes | one-process).
 */
import pg from 'pg';
import { percentile, report, startBenchStack, summarize } from './lib-bench.mjs';

const CHANGES = Number(process.env.CHANGES ?? 1_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 4);

// SHAPE=processes (default): each service in its own process, as deployed; one-process: make dev's.
const { stack, api, createTenant, databaseUrl } = await startBenchStack({ shape: process.env.SHAPE ?? 'processes' });
const audit = new pg.Client({ connectionString: databaseUrl('identity') });
await audit.connect();
const notesDb = new pg.Client({ connectionString: databaseUrl('notes_tasks') });
await notesDb.connect();
try {
  const tenant = await createTenant();
  const key = tenant.api_key;
  const answered = new Map(); // note id → when its POST answered
  const seen = new Map(); // note id → when its entry was first read
  let polling = true;
  // Asks only for the entries still awaited (answered, not seen yet): a poll that re-read every
  // entry so far loaded the database it measures more with each change.
  const poller = (async () => {
    while (polling) {
      const awaited = [...answered.keys()].filter((id) => !seen.has(id));
      if (awaited.length) {
        const { rows } = await audit.query(
          `SELECT resource_id FROM audit_log WHERE tenant_id = $1 AND action = 'note.created' AND resource_id = ANY($2::text[])`,
          [tenant.tenant.id, awaited],
        );
        const now = Date.now();
        for (const r of rows) if (!seen.has(r.resource_id)) seen.set(r.resource_id, now);
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < CHANGES) {
        const i = next++;
        const note = await api('POST', '/api/v1/notes', key, { title: `change ${i}`, body: 'audited' });
        answered.set(note.id, Date.now());
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
  console.log(
    `${CHANGES} note creations through the gateway (${CONCURRENCY} at a time, ${((CHANGES / wall) * 1000).toFixed(0)} per s)`,
  );
  console.log(`response → audit-log entry: ${summarize(lag)}`);
  lag.sort((a, b) => a - b);

  // Where the time goes, per stage.
  const { rows: outbox } = await notesDb.query(
    `SELECT resource_id, id, extract(epoch FROM created_at) * 1000 AS written, extract(epoch FROM published_at) * 1000 AS acked
       FROM outbox WHERE tenant_id = $1 AND event_type = 'note.created'`,
    [tenant.tenant.id],
  );
  // identity's consumer keeps no row of its own per event (the entry's id is its record), so the
  // stage after the broker's ack ends when the poller sees the entry.
  const stages = {
    'answered → published (relay wake-up, publish, broker ack)': [],
    'published → entry seen (fetch, insert, poll)': [],
    'write tx start → answered': [],
  };
  const keys = Object.keys(stages);
  for (const r of outbox) {
    const a = answered.get(r.resource_id);
    if (a === undefined || r.acked === null) continue;
    stages[keys[0]].push(Number(r.acked) - a);
    stages[keys[1]].push(seen.get(r.resource_id) - Number(r.acked));
    stages[keys[2]].push(a - Number(r.written));
  }
  console.log('per stage (ms; negative: the stage ended before the client had the response):');
  for (const [name, ms] of Object.entries(stages)) console.log(`  ${name.padEnd(56)} ${summarize(ms)}`);
  report('audit_p50', 'change → audit-log entry through Kafka, p50', percentile(lag, 50), 'ms', {
    value: 25,
    better: 'lower',
  });
  report('audit_p99', 'change → audit-log entry through Kafka, p99', percentile(lag, 99), 'ms', {
    value: 250,
    better: 'lower',
  });
} finally {
  await audit.end().catch(() => undefined);
  await notesDb.end().catch(() => undefined);
  await stack.stop();
}
