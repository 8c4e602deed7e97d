/**
 * CPU per admission of the rate-limit counter the gateway replicas share (services/gateway
 * shared-counter.ts) against the per-replica counter it replaced (express-rate-limit's MemoryStore),
 * in turns (A B B A …), on the run's PostgreSQL. Not a test, and not part of `make bench`.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-rate-counter.mjs
 *
 * Each turn admits TAKES requests, CONCURRENCY at a time, spread over KEYS keys with the default
 * per-credential limit (600 a minute: a lease of 6), each request counted twice as the gateway does
 * (its credential and its tenant, the tenant's limit 6,000: a lease of 60). Printed per turn: this
 * process's CPU per request (what a gateway replica spends), PostgreSQL's (its backends', from /proc)
 * and the statements per request. Env: KEYS (500), TAKES (20000), CONCURRENCY (64), PAIRS (3).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { MemoryStore } from 'express-rate-limit';
import { createPool, runMigrations } from '@workauto/db';
import { createLogger } from '@workauto/logger';
import { ensureDatabase } from '@workauto/db';
import { SharedRateCounter } from '../services/gateway/dist/shared-counter.js';

const KEYS = Number(process.env.KEYS ?? 500);
const TAKES = Number(process.env.TAKES ?? 20_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 64);
const PAIRS = Number(process.env.PAIRS ?? 3);
const server = process.env.TEST_DATABASE_URL;
if (!server) throw new Error('run under with-infra (TEST_DATABASE_URL)');

const url = await ensureDatabase(server, `bench_rate_${process.pid}`);
const pool = createPool(url, { max: 5, applicationName: 'bench-rate' });
await runMigrations(pool, [new URL('../services/gateway/migrations', import.meta.url).pathname]);

// PostgreSQL's CPU: every process whose parent is the postmaster of TEST_DATABASE_URL's port.
const port = new URL(server).port;
const stat = (pid) =>
  readFileSync(`/proc/${pid}/stat`, 'utf8')
    .slice(readFileSync(`/proc/${pid}/stat`, 'utf8').lastIndexOf(')') + 2)
    .split(' ');
const cmdline = (pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
const pids = () => readdirSync('/proc').filter((p) => /^\d+$/.test(p));
const postmaster = pids().find((p) => {
  try {
    return /postgres/.test(cmdline(p)) && cmdline(p).includes(`-p ${port}`);
  } catch {
    return false;
  }
});
const pgTicks = () => {
  let ticks = 0;
  for (const p of pids()) {
    try {
      const s = stat(p);
      if (p === postmaster || s[1] === postmaster)
        ticks += Number(s[11]) + Number(s[12]) + Number(s[13]) + Number(s[14]);
    } catch {
      // gone
    }
  }
  return ticks;
};
const TICK_US = 10_000; // USER_HZ 100

let statements = 0;
const counted = { query: (...a) => (statements++, pool.query(...a)) };

async function turn(name) {
  let take;
  let stop = () => undefined;
  if (name === 'memory') {
    const perKey = new MemoryStore();
    perKey.init({ windowMs: 60_000 });
    const perTenant = new MemoryStore();
    perTenant.init({ windowMs: 60_000 });
    take = async (i) => {
      await perKey.increment(`k${i % KEYS}`);
      await perTenant.increment(`t${i % 50}`);
    };
    stop = () => (perKey.shutdown(), perTenant.shutdown());
  } else {
    const counter = new SharedRateCounter(counted, createLogger('bench', 'silent'));
    take = async (i) => {
      await counter.take(`request:k${i % KEYS}:${name}${Date.now() >> 16}`, 600);
      await counter.take(`tenant:t${i % 50}:${name}${Date.now() >> 16}`, 6_000);
    };
  }
  statements = 0;
  const cpu0 = process.cpuUsage();
  const pg0 = pgTicks();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < TAKES; i = next++) await take(i);
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const pg = (pgTicks() - pg0) * TICK_US;
  stop();
  console.log(
    `${name}: ${((cpu.user + cpu.system) / TAKES).toFixed(1)} µs of this process and ${(pg / TAKES).toFixed(1)} µs of PostgreSQL per request, ${(statements / TAKES).toFixed(3)} statements per request, ${(TAKES / (ms / 1000)).toFixed(0)} requests/s`,
  );
}

await turn('shared'); // warm-up
for (let p = 0; p < PAIRS; p++)
  for (const name of p % 2 ? ['shared', 'memory'] : ['memory', 'shared']) await turn(name);
await pool.end();
