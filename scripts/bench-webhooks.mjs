/**
 * Webhook deliveries (not a test), in the deployment shape: each service in its own process, two
 * webhooks replicas, the real broker when KAFKA_BROKERS is set, a node:http receiver on loopback
 * that answers 200 at once.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-webhooks.mjs
 *
 * 1. Latency: CHANGES note creations through the gateway (4 at a time), one endpoint; for each, the
 *    time from the API's response to the receiver having the whole request.
 * 2. Throughput: ENDPOINTS endpoints on the receiver (each takes note.created, so each change makes
 *    ENDPOINTS deliveries; WEBHOOK_ENDPOINT_CONCURRENCY caps each endpoint at 4 in flight, so one
 *    endpoint alone is bound by 4 / its round trip: 50 endpoints let both replicas' 64 slots fill), NOTES
 *    changes made as fast as the API takes them; deliveries per second at the receiver between the
 *    10th and the 90th percentile of arrivals (the steady state, without start-up and tail).
 * Env: CHANGES (500), ENDPOINTS (50), NOTES (120).
 */
import { startReceiver } from '@workauto/webhooks/testing';
import {
  cpuSnapshot,
  percentile,
  printCpuPerRequest,
  printTopStatements,
  report,
  startBenchStack,
  statementsSince,
  summarize,
} from './lib-bench.mjs';
import { loadavg } from 'node:os';

const CHANGES = Number(process.env.CHANGES ?? 500);
const ENDPOINTS = Number(process.env.ENDPOINTS ?? 50);
const NOTES = Number(process.env.NOTES ?? 120);

const { stack, api, createTenant, databaseUrl } = await startBenchStack({
  shape: 'processes',
  extraReplicas: { webhooks: 1 },
});
const receiver = await startReceiver();
try {
  // 1. Latency.
  const tenant = await createTenant('Latency');
  const key = tenant.api_key;
  await api('POST', '/api/v1/webhook-endpoints', key, { url: receiver.url, event_types: ['note.created'] });
  const arrived = new Map(); // note id → performance.now() at the receiver
  const answered = new Map();
  let seen = 0;
  const collect = () => {
    for (; seen < receiver.received.length; seen++) {
      const r = receiver.received[seen];
      const body = JSON.parse(r.body);
      if (body.type === 'note.created' && !arrived.has(body.data.id)) arrived.set(body.data.id, r.at);
    }
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < CHANGES) {
        next++;
        const note = await api('POST', '/api/v1/notes', key, { title: `change ${next}`, body: 'hooked' });
        answered.set(note.id, performance.now());
      }
    }),
  );
  for (const end = performance.now() + 60_000; arrived.size < CHANGES && performance.now() < end;) {
    collect();
    await new Promise((r) => setTimeout(r, 20));
  }
  collect();
  if (arrived.size < CHANGES) throw new Error(`only ${arrived.size} of ${CHANGES} deliveries arrived within 60 s`);
  const lag = [...answered].map(([id, t]) => Math.max(0, arrived.get(id) - t));
  console.log(
    `transport: ${process.env.KAFKA_BROKERS ? `Kafka at ${process.env.KAFKA_BROKERS}` : 'in-process'}; 2 webhooks replicas, each service in its own process`,
  );
  console.log(`${CHANGES} note creations through the gateway (4 at a time), one endpoint`);
  console.log(`API response → receiver: ${summarize(lag)}`);
  // make bench's table (docs/benchmarks.md, "Result lines").
  report(
    'webhooks_delivery_p99',
    'webhooks: API → receiver p99',
    percentile(
      [...lag].sort((a, b) => a - b),
      99,
    ),
    'ms',
    { value: 400, better: 'lower' },
  );

  // 2. Throughput.
  const busy = await createTenant('Throughput');
  for (let i = 0; i < ENDPOINTS; i++)
    await api('POST', '/api/v1/webhook-endpoints', busy.api_key, {
      url: `${receiver.url}?e=${i}`,
      event_types: ['note.created'],
    });
  const before = receiver.received.length;
  const total = NOTES * ENDPOINTS;
  await statementsSince(databaseUrl('webhooks')); // from here: the throughput phase's statements
  const cpuBefore = cpuSnapshot();
  let made = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (made < NOTES) {
        made++;
        await api('POST', '/api/v1/notes', busy.api_key, { title: `load ${made}`, body: 'x' });
      }
    }),
  );
  const apiDone = performance.now();
  for (const end = performance.now() + 180_000; receiver.received.length - before < total && performance.now() < end;)
    await new Promise((r) => setTimeout(r, 50));
  const cpuAfter = cpuSnapshot();
  const got = receiver.received.slice(before);
  if (got.length < total) throw new Error(`only ${got.length} of ${total} deliveries arrived within 180 s`);
  const times = got.map((r) => r.at).sort((a, b) => a - b);
  const lo = times[Math.floor(total * 0.1)];
  const hi = times[Math.floor(total * 0.9)];
  console.log(
    `${NOTES} changes × ${ENDPOINTS} endpoints = ${total} deliveries; the API took the changes in ${((apiDone - started) / 1000).toFixed(1)} s, the last delivery arrived after ${((times.at(-1) - started) / 1000).toFixed(1)} s`,
  );
  console.log(
    `deliveries per second (10th–90th percentile of arrivals): ${((0.8 * total) / ((hi - lo) / 1000)).toFixed(0)}; overall ${(total / ((times.at(-1) - times[0]) / 1000)).toFixed(0)}`,
  );
  report(
    'webhooks_delivery_rate',
    'webhook deliveries to a loopback receiver',
    (0.8 * total) / ((hi - lo) / 1000),
    '/s',
    { value: 1500, better: 'higher' },
  );
  // Per delivery, whatever the machine's load: the CPU of every process (the receiver and the
  // API's clients are this script) and the webhooks database's statements (the notes' intake too).
  printCpuPerRequest('deliveries', cpuBefore, cpuAfter, total);
  await printTopStatements(databaseUrl('webhooks'));
  const statements = await statementsSince(databaseUrl('webhooks'));
  const webhooksDb = statements && [...statements].find(([db]) => db.endsWith('_webhooks'))?.[1];
  if (webhooksDb)
    console.log(
      `webhooks database per delivery: ${(webhooksDb.calls / total).toFixed(2)} statements, ${((webhooksDb.ms * 1000) / total).toFixed(0)} µs`,
    );
  console.log(
    `load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
} finally {
  await receiver.close();
  await stack.stop();
}
