#!/usr/bin/env node
/**
 * Soak: the fault test's cluster (deploy/embedded/src/faults.ts: every service its own process,
 * replicas, two gateways, a PostgreSQL server and a Kafka broker of its own) under a steady keyed
 * write workload from four tenants, with the resident memory (RSS) of every process sampled. After
 * the warm-up it reports each process's growth: last sample minus the first after warm-up, the
 * highest sample, and the slope of a least-squares line through the samples (MB per hour). Ends
 * with the fault test's invariants (every write once, audited once, delivered).
 *
 *   make build && node scripts/soak.mjs [--minutes 60] [--warmup 10] [--every 30] [--json out.json]
 *
 * Not part of make test. Needs Java 17 (the broker) like the suite; prints a line per sample.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Workload, checkInvariants, residentMemory, startFaultCluster } from '../deploy/embedded/dist/faults.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '60' },
    warmup: { type: 'string', default: '10' },
    every: { type: 'string', default: '30' },
    json: { type: 'string' },
  },
});
const minutes = Number(values.minutes);
const warmupMinutes = Number(values.warmup);
const everyS = Number(values.every);
if (!(minutes > warmupMinutes && warmupMinutes >= 0 && everyS > 0)) {
  console.error(
    'usage: node scripts/soak.mjs [--minutes 60] [--warmup 10] [--every 30] [--json out.json] (minutes > warmup)',
  );
  process.exit(2);
}

const began = performance.now();
const elapsedMin = () => (performance.now() - began) / 60_000;
const log = (line) => console.log(`soak ${elapsedMin().toFixed(1)} min: ${line}`);

const cluster = await startFaultCluster({ log });
let stopping = false;
const stop = async (code) => {
  if (stopping) return;
  stopping = true;
  await cluster.close().catch(() => undefined);
  process.exit(code);
};
process.on('SIGINT', () => void stop(130));
process.on('SIGTERM', () => void stop(143));

try {
  log(
    `cluster ready (${cluster.processes.children.size} processes); writing for ${minutes} min, warm-up ${warmupMinutes} min`,
  );
  const workload = new Workload(cluster, { writers: 1, pauseMs: 100, giveUpMs: 90_000 });
  workload.start();
  /** process → [{min, mb}] */
  const samples = {};
  const end = began + minutes * 60_000;
  while (performance.now() < end) {
    const rss = await residentMemory(cluster);
    for (const [name, mb] of Object.entries(rss)) (samples[name] ??= []).push({ min: elapsedMin(), mb });
    const writes = workload.writes.length;
    log(
      `${writes} writes; RSS MB ${Object.entries(rss)
        .map(([n, mb]) => `${n} ${mb}`)
        .join(', ')}`,
    );
    await sleep(Math.min(everyS * 1000, Math.max(0, end - performance.now())));
  }
  await workload.stop();
  const report = Object.entries(samples).map(([name, all]) => {
    const after = all.filter((s) => s.min >= warmupMinutes);
    const first = after[0] ?? all.at(-1);
    const last = all.at(-1);
    return {
      process: name,
      warm_mb: first.mb,
      last_mb: last.mb,
      max_mb: Math.max(...after.map((s) => s.mb)),
      growth_mb: last.mb - first.mb,
      slope_mb_per_hour: Math.round(slope(after) * 60 * 10) / 10,
    };
  });
  console.table(report);
  const phases = workload.byPhase();
  const invariants = await checkInvariants(cluster, workload);
  const summary = {
    minutes,
    warmup_minutes: warmupMinutes,
    writes: workload.writes.length,
    acknowledged: workload.writes.filter((w) => w.id).length,
    server_errors: phases.reduce((n, p) => n + p.serverErrors, 0),
    invariants: {
      missing: invariants.missing.length,
      duplicates: invariants.duplicates.length,
      audit_not_once: Object.keys(invariants.auditNotOnce).length,
      undelivered: invariants.undelivered.length,
      pending_outbox: invariants.pendingOutbox,
      pending_jobs: invariants.pendingJobs,
    },
    rss: report,
  };
  console.log(JSON.stringify(summary, null, 1));
  if (values.json) writeFileSync(values.json, JSON.stringify({ ...summary, samples }, null, 1));
  await stop(0);
} catch (err) {
  console.error(err);
  console.error(cluster.output().slice(-5_000));
  await stop(1);
}

/** Least-squares slope of mb over min. */
function slope(points) {
  if (points.length < 2) return 0;
  const n = points.length;
  const mx = points.reduce((a, p) => a + p.min, 0) / n;
  const my = points.reduce((a, p) => a + p.mb, 0) / n;
  const sxy = points.reduce((a, p) => a + (p.min - mx) * (p.mb - my), 0);
  const sxx = points.reduce((a, p) => a + (p.min - mx) ** 2, 0);
  return sxx ? sxy / sxx : 0;
}
