/**
 * The audit log export's memory (not a test): identity and the gateway each in its own process (as
 * deployed), audit rows written straight into identity's database, GET /api/v1/audit-log/export
 * read through the gateway, and each process's resident memory read from /proc/<pid>/status.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/measure-audit-export.mjs
 *
 * One tenant per size in SIZES (10,000, 100,000 and 300,000 entries). Each export runs on freshly
 * started processes (a process keeps the RSS it once reached, so one export would otherwise carry
 * over into the next): a warm-up export of nothing, RSS at rest, then the export, during which the
 * peak RSS of identity and of the gateway is taken (VmHWM, reset first by writing 5 to
 * /proc/<pid>/clear_refs, and VmRSS sampled every 10 ms). Both formats, and the 100,000 once more by
 * a client that stops reading for PAUSE_MS after its first MiB (back-pressure: nothing piles up).
 * Constant memory: the peaks do not grow with the size. Then the first page of each list filter on
 * the 100,000-entry tenant (EXPLAIN ANALYZE: the index it used, its time), and how long each new
 * filter index takes to build over the whole table.
 * Env: SIZES (10000,100000,300000), PAUSE_MS (3000).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { databaseUrlFor } from '@workauto/db';
import { startServiceProcesses } from '../deploy/embedded/dist/processes.js';

const SIZES = (process.env.SIZES ?? '10000,100000,300000').split(',').map(Number);
const PAUSE_MS = Number(process.env.PAUSE_MS ?? 3_000);
const server = process.env.TEST_DATABASE_URL;
if (!server || !process.env.KAFKA_BROKERS) {
  console.error(
    'run through deploy/embedded/dist/with-infra.js with Kafka (see the header): each service process needs it',
  );
  process.exit(2);
}

// Every start uses the same databases (and so the same tenants and rows).
const options = {
  databaseServerUrl: server,
  databasePrefix: `measure_${randomBytes(4).toString('hex')}`,
  platformAdminToken: `measure-admin-${randomBytes(24).toString('hex')}`,
  encryptionKeys: Keyring.generateSpec(),
  kafkaBrokers: process.env.KAFKA_BROKERS,
  env: { RATE_LIMIT_PER_MINUTE: '100000000' },
};
const db = new pg.Client({ connectionString: databaseUrlFor(server, `${options.databasePrefix}_identity`) });

const mib = (kb) => (kb / 1024).toFixed(1);
/** VmRSS and VmHWM (kB) of a process. */
function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** fn with the product started as processes; stopped after (what a failed process printed is shown). */
async function withCluster(fn) {
  const cluster = await startServiceProcesses(options);
  try {
    return await fn(cluster, {
      identity: cluster.children.get('identity').proc.pid,
      gateway: cluster.children.get('gateway').proc.pid,
    });
  } catch (err) {
    for (const [name, c] of cluster.children)
      if (c.proc.exitCode !== null || c.proc.signalCode !== null)
        console.error(`${name} exited (${c.proc.exitCode ?? c.proc.signalCode}):\n${c.output.join('').slice(-3000)}`);
    throw err;
  } finally {
    await cluster.stop();
  }
}

async function createTenant(url, name) {
  const res = await fetch(`${url}/api/v1/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${options.platformAdminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name,
      owner: { name: 'Owner', email: `owner-${randomBytes(3).toString('hex')}@measure.test` },
    }),
  });
  if (res.status !== 201) throw new Error(`tenant bootstrap: ${res.status} ${await res.text()}`);
  return res.json();
}

/** n entries of a tenant over the last 30 days, shaped like the real ones (about 500 bytes of NDJSON each). */
async function insertEntries(tenantId, actors, n) {
  await db.query(
    `INSERT INTO audit_log (id, tenant_id, action, actor_id, actor_type, resource_type, resource_id, ip_address, user_agent, metadata, created_at)
     SELECT gen_random_uuid(), $1, a.action, ($2::text[])[1 + i % array_length($2::text[], 1)], 'api_key', split_part(a.action, '.', 1),
            md5('resource' || (i % 5000))::uuid::text, '203.0.113.' || (i % 250), 'Mozilla/5.0 (X11; Linux x86_64) workauto-measure/1.0',
            jsonb_build_object('title', 'Quarterly planning notes ' || i, 'word_count', i % 900, 'body_changed', true, 'mentions', i % 7),
            now() - interval '30 days' + i * (interval '30 days' / $3)
       FROM generate_series(1, $3) AS i,
            LATERAL (SELECT (ARRAY['note.created','note.updated','task.completed','member.updated','deal.stage_changed'])[1 + i % 5] AS action) a`,
    [tenantId, actors, n],
  );
}

/** Reads an export through the gateway while sampling both processes; returns size, time and peaks. */
async function measureExport(url, pids, key, query, { pauseAfterBytes } = {}) {
  for (const pid of Object.values(pids)) writeFileSync(`/proc/${pid}/clear_refs`, '5'); // resets VmHWM
  const peak = { identity: 0, gateway: 0 };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      for (const [name, pid] of Object.entries(pids)) peak[name] = Math.max(peak[name], memory(pid).rss);
      await sleep(10);
    }
  })();
  const started = performance.now();
  const res = await fetch(`${url}/api/v1/audit-log/export?${query}`, { headers: { authorization: `Bearer ${key}` } });
  if (res.status !== 200) throw new Error(`export ${query}: ${res.status} ${await res.text()}`);
  let bytes = 0;
  let lines = 0;
  let paused = false;
  for await (const chunk of res.body) {
    bytes += chunk.length;
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
    if (pauseAfterBytes && !paused && bytes >= pauseAfterBytes) {
      paused = true;
      await sleep(PAUSE_MS);
    }
  }
  const ms = performance.now() - started;
  sampling = false;
  await sampler;
  for (const [name, pid] of Object.entries(pids)) peak[name] = Math.max(peak[name], memory(pid).hwm);
  return { bytes, lines: query.includes('csv') ? lines - 1 : lines, ms, peak };
}

const actors = Array.from({ length: 20 }, () => crypto.randomUUID());
const tenants = new Map();
await withCluster(async (cluster) => {
  await db.connect();
  const t = performance.now();
  for (const size of SIZES) {
    const tenant = await createTenant(cluster.url, `Size ${size}`);
    await insertEntries(tenant.tenant.id, actors, size);
    tenants.set(size, tenant);
  }
  await db.query('ANALYZE audit_log');
  console.log(`inserted ${SIZES.reduce((a, b) => a + b)} audit rows in ${Math.round(performance.now() - t)} ms`);
});
const large = tenants.get(100_000) ?? tenants.get(SIZES.at(-1));

const runs = SIZES.flatMap((size) => [
  [`${size} ndjson`, tenants.get(size).api_key, 'format=ndjson'],
  [`${size} csv`, tenants.get(size).api_key, 'format=csv'],
]);
runs.push([
  `100000 ndjson, client pauses ${PAUSE_MS} ms`,
  large.api_key,
  'format=ndjson',
  { pauseAfterBytes: 1 << 20 },
]);
console.log('\n| export | entries | MiB | s | identity RSS at rest → peak (MiB) | gateway RSS at rest → peak (MiB) |');
console.log('|---|---|---|---|---|---|');
for (const [name, key, query, opts] of runs) {
  await withCluster(async (cluster, pids) => {
    // At rest: after a warm-up export of nothing (first use loads code and fills pools), settled.
    await measureExport(cluster.url, pids, key, 'format=ndjson&to=2000-01-01T00:00:00Z');
    await sleep(2_000);
    const rest = Object.fromEntries(Object.entries(pids).map(([n, pid]) => [n, memory(pid).rss]));
    const r = await measureExport(cluster.url, pids, key, query, opts);
    console.log(
      `| ${name} | ${r.lines} | ${mib(r.bytes / 1024)} | ${(r.ms / 1000).toFixed(2)} | ${mib(rest.identity)} → ${mib(r.peak.identity)} | ${mib(rest.gateway)} → ${mib(r.peak.gateway)} |`,
    );
  });
}

// Each filter's first page on the 100,000-entry tenant: the plan's index and its time.
const filters = {
  none: '',
  action: `AND action = 'note.updated'`,
  resource_type: `AND resource_type = 'task'`,
  actor_id: `AND actor_id = '${actors[3]}'`,
  resource_id: `AND resource_id = md5('resource42')::uuid::text`,
  'from/to (one day)': `AND created_at >= now() - interval '10 days' AND created_at < now() - interval '9 days'`,
  'actor_id + action + 15 days': `AND actor_id = '${actors[3]}' AND action = 'note.updated' AND created_at >= now() - interval '20 days' AND created_at < now() - interval '5 days'`,
};
console.log('\n| filter (first page of 50, newest first) | index | ms |');
console.log('|---|---|---|');
for (const [name, where] of Object.entries(filters)) {
  const sql = `SELECT * FROM audit_log WHERE tenant_id = '${large.tenant.id}' ${where} ORDER BY created_at DESC, id DESC LIMIT 51`;
  await db.query(sql);
  const plan = (await db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`)).rows[0]['QUERY PLAN'][0];
  const indexes = new Set(
    JSON.stringify(plan)
      .match(/"Index Name":"[a-z_]+"/g)
      ?.map((m) => m.slice(14, -1)) ?? [],
  );
  console.log(`| ${name} | ${[...indexes].join(', ') || 'none (scan)'} | ${plan['Execution Time'].toFixed(2)} |`);
}

// Building the two new indexes over this table (the migrations build them CONCURRENTLY).
const rows = (await db.query('SELECT count(*)::int AS n FROM audit_log')).rows[0].n;
for (const [index, column] of [
  ['audit_log_by_actor', 'actor_id'],
  ['audit_log_by_resource', 'resource_id'],
]) {
  await db.query(`DROP INDEX ${index}`);
  const t = performance.now();
  await db.query(`CREATE INDEX CONCURRENTLY ${index} ON audit_log (tenant_id, ${column}, created_at DESC, id DESC)`);
  console.log(`CREATE INDEX CONCURRENTLY ${index} over ${rows} rows: ${Math.round(performance.now() - t)} ms`);
}
await db.end();
