/**
 * What the whole product spends while nobody calls it (not a test): every service in its own
 * process, PostgreSQL and the Kafka broker, started and left alone. A small installation is idle
 * most of the day, so this is most of its bill; and a timer that fires too often shows here first
 * (kafkajs's per-connection 1 ms timer did: docs/benchmarks.md, "Idle CPU").
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-idle.mjs
 *   (or `make bench`)
 *
 * Prints each process's CPU in ms per second of wall time (user + system, from /proc) over the
 * measured window, after a settling time in which the services finish starting (topics, consumer
 * groups, first polls). Env: SETTLE (15 s), DURATION (30 s). Needs TEST_DATABASE_URL (with-infra sets it).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { cpuDelta, cpuSnapshot, report, startBenchStack } from './lib-bench.mjs';

const SETTLE = Number(process.env.SETTLE ?? 15);
const DURATION = Number(process.env.DURATION ?? 30);

const { stack } = await startBenchStack({ shape: 'processes' });
try {
  await sleep(SETTLE * 1000);
  const before = cpuSnapshot();
  await sleep(DURATION * 1000);
  const rows = [...cpuDelta(before, cpuSnapshot())]
    .filter(([kind]) => kind !== 'this script' && !kind.startsWith('its finished children'))
    .map(([kind, ms]) => [kind, ms / DURATION])
    .sort((a, b) => b[1] - a[1]);
  const services = rows.filter(([kind]) => kind !== 'postgresql' && kind !== 'kafka');
  const sum = (list) => list.reduce((a, [, perSecond]) => a + perSecond, 0);
  console.log(`idle, ${DURATION} s after ${SETTLE} s of settling: CPU ms per second of wall time`);
  for (const [kind, perSecond] of rows) console.log(`  ${kind.padEnd(16)} ${perSecond.toFixed(1).padStart(6)}`);
  console.log(`  ${'all'.padEnd(16)} ${sum(rows).toFixed(1).padStart(6)}`);
  report(
    'idle_cpu_services',
    'idle: CPU of the services (every process but PostgreSQL and Kafka)',
    sum(services),
    'ms/s',
  );
  report('idle_cpu_all', 'idle: CPU of every process, PostgreSQL and Kafka included', sum(rows), 'ms/s');
} finally {
  await stack.stop();
}
