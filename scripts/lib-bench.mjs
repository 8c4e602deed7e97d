/**
 * What every benchmark script shares: the whole product from deploy/embedded's startStack (the
 * composition make dev runs) on the run's PostgreSQL (and Kafka when KAFKA_BROKERS is set), an
 * HTTP helper, and percentiles. Run the scripts through with-infra (see each script's header).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Keyring } from '@workauto/crypto';
import { databaseUrlFor } from '@workauto/db';
import { generateCallerKeys } from '@workauto/grpc';
import { createLogger } from '@workauto/logger';
import { startStack } from '../deploy/embedded/dist/stack.js';
import { startServiceProcesses } from '../deploy/embedded/dist/processes.js';

/**
 * shape 'one-process' (default): make dev's composition, everything on one event loop.
 * shape 'processes': each service's main.js in its own process, as a cluster runs them.
 */
export async function startBenchStack({ shape = 'one-process', extraReplicas = {} } = {}) {
  const server = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!server) {
    console.error(
      'TEST_DATABASE_URL is not set: run through deploy/embedded/dist/with-infra.js (see the script header)',
    );
    process.exit(2);
  }
  const prefix = `bench_${randomBytes(4).toString('hex')}`;
  const adminToken = `bench-admin-${randomBytes(24).toString('hex')}`;
  const common = {
    databaseServerUrl: server,
    databasePrefix: prefix,
    platformAdminToken: adminToken,
    encryptionKeys: Keyring.generateSpec(),
    kafkaBrokers: process.env.KAFKA_BROKERS,
  };
  let stack;
  if (shape === 'processes') {
    const cluster = await startServiceProcesses({
      ...common,
      extraReplicas,
      env: { RATE_LIMIT_PER_MINUTE: '100000000', GATEWAY_TENANT_CONCURRENCY: '100000' },
    });
    // output(): what every process printed (LOG_LEVEL warn: each 5xx the gateway answered, each unexpected error of a service).
    stack = { url: cluster.url, stop: () => cluster.stop(), output: () => cluster.output() };
  } else {
    stack = await startStack({
      ...common,
      callerKeys: generateCallerKeys('bench'),
      kafkaNamespace: `${prefix}.`,
      logger: createLogger('bench', 'warn'),
      gatewayOptions: { rateLimitPerMinute: 100_000_000, tenantConcurrency: 100_000 },
    });
  }
  async function api(method, path, key, body) {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = res.status === 204 ? undefined : await res.json();
    if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${JSON.stringify(json)}`);
    return json;
  }
  async function createTenant(name = 'Bench') {
    return api('POST', '/api/v1/admin/tenants', adminToken, {
      name,
      owner: { name: 'Owner', email: `owner-${randomBytes(3).toString('hex')}@bench.test` },
    });
  }
  return { stack, api, createTenant, databaseUrl: (service) => databaseUrlFor(server, `${prefix}_${service}`) };
}

/**
 * Where a database's time went: the statements with the most total (planning + execution) time,
 * when the run's PostgreSQL was started with WORKAUTO_PG_STAT_STATEMENTS=1 (see docs/benchmarks.md).
 */
export async function printTopStatements(url, top = 12) {
  await withStatStatements(url, async (client) => {
    const { rows } = await client.query(
      `SELECT calls, round((total_plan_time + total_exec_time)::numeric, 1) AS ms, round(total_plan_time::numeric, 1) AS plan_ms,
              round(((total_plan_time + total_exec_time) / nullif(calls, 0) * 1000)::numeric) AS us_per_call, left(regexp_replace(query, '\\s+', ' ', 'g'), 140) AS query
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY total_plan_time + total_exec_time DESC LIMIT $1`,
      [top],
    );
    console.log(`top statements of ${new URL(url).pathname.slice(1)} (pg_stat_statements):`);
    for (const r of rows)
      console.log(
        `  ${String(r.ms).padStart(9)} ms (plan ${String(r.plan_ms).padStart(7)})  ${String(r.calls).padStart(7)} calls  ${String(r.us_per_call).padStart(6)} µs/call  ${r.query}`,
      );
  });
}

/**
 * The statements of every database that PostgreSQL planned most (pg_stat_statements, with
 * WORKAUTO_PG_STAT_STATEMENTS=1): calls, plans (a prepared statement on its generic plan is planned
 * a few times per connection; one planned on every call, plans ≈ calls), planning and total time.
 */
export async function printPlannedStatements(url, top = 12) {
  await withStatStatements(url, async (client) => {
    const { rows } = await client.query(
      `SELECT d.datname AS db, s.calls, s.plans, round(s.total_plan_time::numeric, 1) AS plan_ms,
              round((s.total_plan_time + s.total_exec_time)::numeric, 1) AS ms,
              left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110) AS query
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        ORDER BY s.total_plan_time DESC LIMIT $1`,
      [top],
    );
    console.log('most planned statements, every database (pg_stat_statements):');
    for (const r of rows)
      console.log(
        `  ${String(r.plan_ms).padStart(8)} ms planning of ${String(r.ms).padStart(8)} ms  ${String(r.plans).padStart(6)} plans ${String(r.calls).padStart(6)} calls  ${r.db.replace(/^bench_[0-9a-f]+_/, '').padEnd(14)} ${r.query}`,
      );
  });
}

/** fn(client) on a connection to url with pg_stat_statements, when the run's PostgreSQL has it (else undefined). */
async function withStatStatements(url, fn) {
  if (process.env.WORKAUTO_PG_STAT_STATEMENTS !== '1') return undefined;
  const { Client } = (await import('pg')).default;
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Statements per database since the last call (pg_stat_statements, when the run's PostgreSQL was
 * started with WORKAUTO_PG_STAT_STATEMENTS=1; otherwise undefined): a Map database → { calls, ms }.
 * Counting statements is what a change of round trips does on any machine, however loaded.
 */
export function statementsSince(url) {
  return withStatStatements(url, async (client) => {
    const { rows } = await client.query(
      `SELECT d.datname AS db, sum(s.calls)::bigint AS calls, sum(s.total_plan_time + s.total_exec_time) AS ms
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid GROUP BY d.datname`,
    );
    await client.query('SELECT pg_stat_statements_reset()');
    return new Map(rows.map((r) => [r.db, { calls: Number(r.calls), ms: Number(r.ms) }]));
  });
}

/**
 * CPU time used so far (user + system, ms) by each kind of process on this machine, from /proc:
 * our services by name, PostgreSQL (every backend), Kafka, this script, and this script's finished
 * children (the load generator). Two snapshots around a measurement say where its time went.
 */
export function cpuSnapshot() {
  const tick = 10; // ms per clock tick (USER_HZ 100 on Linux)
  const procs = new Map(); // pid → { ppid, stat fields, cmd }
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      procs.set(Number(pid), {
        ppid: Number(f[1]),
        f,
        cmd: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '),
      });
    } catch {
      // gone meanwhile
    }
  }
  // Only this run's processes: descendants of with-infra (this script's parent), which started
  // PostgreSQL and Kafka, not another run's on the same machine.
  const root = process.ppid;
  const ours = (pid) => {
    for (let p = pid, hops = 0; p > 1 && hops < 20; p = procs.get(p)?.ppid ?? 0, hops++) if (p === root) return true;
    return false;
  };
  // The run's Kafka broker is started detached (scripts/kafka.sh): it is this run's if its
  // server.properties listens on the port KAFKA_BROKERS names.
  const kafkaPort = process.env.KAFKA_BROKERS?.split(',')[0]?.split(':')[1];
  const ourBroker = (cmd) => {
    const props = / (\S+\/server\.properties)/.exec(cmd)?.[1];
    if (!kafkaPort || !props || !cmd.includes('kafka.Kafka')) return false;
    try {
      return readFileSync(props, 'utf8').includes(`:${kafkaPort}`);
    } catch {
      return false;
    }
  };
  const out = new Map();
  /** Each process's kind and CPU ms, so that cpuDelta counts only what was spent between two snapshots. */
  out.pids = new Map();
  let current = 0;
  const add = (k, ms) => {
    out.set(k, (out.get(k) ?? 0) + ms);
    out.pids.set(current, { kind: k, ms: (out.pids.get(current)?.ms ?? 0) + ms });
  };
  for (const [pid, { f, cmd }] of procs) {
    const self = (Number(f[11]) + Number(f[12])) * tick;
    current = pid;
    if (pid === process.pid) {
      add('this script', self);
      current = -1; // the finished children: one account that only grows
      add('its finished children (load generator)', (Number(f[13]) + Number(f[14])) * tick);
      continue;
    }
    if (!ours(pid)) {
      if (ourBroker(cmd)) add('kafka', self);
      continue;
    }
    // A process started with `node --title=role:<name>` by that name (bench-floor's servers, the B
    // build's services), a service by its main.js.
    // A third party's fake in its own process (testing/fake-provider-main.js) by its name.
    const service =
      /^role:(\S+)/.exec(cmd) ??
      /services\/([a-z-]+)\/dist\/main\.js/.exec(cmd) ??
      /\/testing\/(fake-[a-z-]+)-main\.js/.exec(cmd);
    add(
      service ? service[1] : cmd.startsWith('postgres') ? 'postgresql' : cmd.includes('kafka') ? 'kafka' : 'other',
      self,
    );
  }
  return out;
}

/**
 * CPU ms by kind of process between two snapshots, process by process: a process that ended
 * meanwhile (a pool's idle PostgreSQL backend) takes its past CPU with it instead of making the
 * difference negative; one that started counts whole.
 */
export function cpuDelta(before, after) {
  const out = new Map();
  for (const [pid, { kind, ms }] of after.pids)
    out.set(kind, (out.get(kind) ?? 0) + ms - (before.pids.get(pid)?.ms ?? 0));
  return out;
}

/**
 * Prints, per kind of process, the CPU µs per request between two snapshots, and the sum; the
 * kinds in `apart` (a third party's fake) are printed but not summed.
 */
export function printCpuPerRequest(label, before, after, requests, { apart = [] } = {}) {
  const rows = [...cpuDelta(before, after)].filter(([, ms]) => ms > 0).sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((a, [k, ms]) => (apart.includes(k) ? a : a + ms), 0);
  console.log(
    `  CPU per request, ${label} (${requests} requests): ${((total * 1000) / requests).toFixed(0)} µs in all`,
  );
  for (const [k, ms] of rows)
    console.log(
      `    ${(apart.includes(k) ? `${k} (apart)` : k).padEnd(40)} ${((ms * 1000) / requests).toFixed(0).padStart(6)} µs`,
    );
}

/** p-th percentile (nearest rank) of an ascending array. */
export function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export function summarize(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const f = (v) => v.toFixed(1);
  return `p50 ${f(percentile(s, 50))} ms   p90 ${f(percentile(s, 90))} ms   p99 ${f(percentile(s, 99))} ms   min ${f(s[0])} ms   max ${f(s[s.length - 1])} ms`;
}

/**
 * One figure of `make bench`'s table, as a machine-readable line on stdout (docs/benchmarks.md,
 * "Result lines"): `BENCH-RESULT {"id", "label", "value", "unit", "target"?, "better"?}`.
 * scripts/bench-table.mjs collects these lines from every script and prints the table.
 */
export function report(id, label, value, unit, target) {
  const line = {
    id,
    label,
    value: Number(value.toFixed(3)),
    unit,
    ...(target ? { target: target.value, better: target.better } : {}),
  };
  console.log(`BENCH-RESULT ${JSON.stringify(line)}`);
}
