/**
 * Benchmark of GET /api/v1/notes/{id}: through the whole stack (HTTP → gateway (auth, role check,
 * JSON ↔ protobuf) → gRPC → notes-tasks → PostgreSQL) next to a bare Express + pg handler that runs
 * the same SELECT on the same database, in the same run. Not a test.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-notes.mjs
 *   (the services' own processes need Kafka; SHAPE=one-process WORKAUTO_KAFKA=off runs without it)
 *
 * Load: autocannon at concurrency 32 (CONNECTIONS), DURATION seconds per target after WARMUP seconds,
 * run as a child process so the load generator does not share the servers' event loop.
 * SHAPE=processes (default) runs each service's main.js in its own process, as a cluster does;
 * SHAPE=one-process runs make dev's composition (gateway, identity and notes-tasks on one event loop).
 * The two targets take turns, ROUNDS times (DURATION / ROUNDS seconds each): the machine's other load
 * then weighs on both alike.
 * Env: CONNECTIONS (32), DURATION (15), WARMUP (3), ROUNDS (3), SHAPE, CPU_PER_REQUEST=1 (where each
 * target's CPU went, per process kind, from /proc), WRITES=1 (then POST /api/v1/notes through the
 * gateway too: a mutation, with its outbox event). Needs TEST_DATABASE_URL (with-infra sets it).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import express from 'express';
import pg from 'pg';
import { createPool, preparedStatement } from '@workauto/db';
import { cpuSnapshot, printCpuPerRequest, printTopStatements, report, startBenchStack } from './lib-bench.mjs';

const CONNECTIONS = Number(process.env.CONNECTIONS ?? 32);
const DURATION = Number(process.env.DURATION ?? 15);
const WARMUP = Number(process.env.WARMUP ?? 3);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const AUTOCANNON = fileURLToPath(new URL('../node_modules/autocannon/autocannon.js', import.meta.url));

const SHAPE = process.env.SHAPE ?? 'processes';
const { stack, api, createTenant, databaseUrl } = await startBenchStack({ shape: SHAPE });
const base = stack.url;
const notesUrl = databaseUrl('notes_tasks');

// The bare baseline: Express + a pg pool of the service's size, the repo's SELECT, JSON out. No
// auth, no validation beyond the id's shape, no gRPC hop. Its SELECT is prepared, as the service's
// is (libs/db preparedStatement), so the ratio prices the hop and nothing else.
const FIND_NOTE = preparedStatement(
  'bench_bare_find_note',
  `SELECT id, tenant_id, title, body, is_archived, is_pinned, metadata, notebook_id, source_url, word_count, created_at, updated_at, deleted_at
     FROM notes WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`,
);
const pool = createPool(notesUrl, { max: 10, applicationName: 'bench-bare' });
const app = express();
app.disable('x-powered-by');
app.disable('etag');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
let bareTenant = '';
app.get('/api/v1/notes/:id', async (req, res) => {
  if (!UUID.test(req.params.id)) return void res.status(400).json({ error: 'bad id' });
  try {
    const { rows } = await pool.query(FIND_NOTE([bareTenant, req.params.id]));
    if (!rows[0]) return void res.status(404).json({ error: 'not found' });
    res.json(rows[0]);
  } catch {
    res.status(500).json({ error: 'internal' });
  }
});
const bare = app.listen(0, '127.0.0.1');
await once(bare, 'listening');
const bareBase = `http://127.0.0.1:${bare.address().port}`;

/** autocannon in a child process; its JSON summary. `body`: a JSON POST. */
async function load(url, headers, seconds, body) {
  const args = [AUTOCANNON, '-c', String(CONNECTIONS), '-d', String(seconds), '-j'];
  if (body !== undefined) args.push('-m', 'POST', '-b', JSON.stringify(body), '-H', 'content-type=application/json');
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  args.push(url);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`autocannon exited with ${code}`);
  return JSON.parse(out);
}

async function measure(name, url, headers, seconds, warmup, body) {
  const warm = warmup > 0 ? (await load(url, headers, warmup, body)).requests.total : 0;
  const cpuBefore = cpuSnapshot();
  const r = await load(url, headers, seconds, body);
  const cpuAfter = cpuSnapshot();
  if (process.env.CPU_PER_REQUEST === '1') printCpuPerRequest(name, cpuBefore, cpuAfter, r.requests.total);
  /** CPU ms by kind of process during this measurement. */
  const cpu = new Map([...cpuAfter].map(([k, ms]) => [k, ms - (cpuBefore.get(k) ?? 0)]));
  const bad = r.non2xx + r.errors + r.timeouts;
  const row = {
    name,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    bad,
    cpu,
  };
  console.log(
    `  ${name.padEnd(34)} ${row.rps.toFixed(0).padStart(7)} req/s   p50 ${String(row.p50).padStart(4)} ms   p99 ${String(row.p99).padStart(4)} ms   (${row.total} requests + ${warm} warm-up, ${bad} non-2xx/errors)`,
  );
  if (bad > 0) throw new Error(`${name}: ${bad} requests failed`);
  return row;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const check = new pg.Client({ connectionString: notesUrl });
try {
  const tenant = await createTenant();
  const key = tenant.api_key;
  bareTenant = tenant.tenant.id;
  const body = `# Weekly notes\n\n${'Discussed the roadmap with [[contact:0193a1b2-0000-7000-8000-00000000000a|Dana]] and the budget. '.repeat(12)}`;
  const note = await api('POST', '/api/v1/notes', key, { title: 'Bench note', body, metadata: { source: 'bench' } });
  // Some other rows, so the lookup is an index lookup among many.
  for (let i = 0; i < 200; i++) await api('POST', '/api/v1/notes', key, { title: `filler ${i}`, body: 'x' });
  await check.connect();
  await check.query('VACUUM ANALYZE notes');

  const path = `/api/v1/notes/${note.id}`;
  const viaGateway = await api('GET', path, key);
  const viaBare = await (await fetch(`${bareBase}${path}`)).json();
  if (viaGateway.id !== note.id || viaBare.id !== note.id || viaGateway.body !== viaBare.body)
    throw new Error('the two targets disagree');
  console.log(
    `GET /api/v1/notes/{id} (note of ${body.length} characters, services: ${SHAPE}), concurrency ${CONNECTIONS}, ${DURATION} s each in ${ROUNDS} turns after ${WARMUP} s warm-up:`,
  );
  // On a shared machine the load of other work moves between minutes: the two targets take turns
  // (ROUNDS rounds of DURATION / ROUNDS seconds each), and the ratio is over their summed requests.
  const gw = [];
  const bareRows = [];
  for (let round = 0; round < ROUNDS; round++) {
    gw.push(
      await measure(
        'gateway → gRPC → notes-tasks → pg',
        `${base}${path}`,
        { authorization: `Bearer ${key}` },
        DURATION / ROUNDS,
        round === 0 ? WARMUP : 0,
      ),
    );
    bareRows.push(
      await measure('bare express + pg', `${bareBase}${path}`, {}, DURATION / ROUNDS, round === 0 ? WARMUP : 0),
    );
  }
  const sum = (rows) => rows.reduce((a, r) => a + r.total, 0);
  const g = { rps: sum(gw) / DURATION, p99: median(gw.map((r) => r.p99)) };
  const x = { rps: sum(bareRows) / DURATION, p99: median(bareRows.map((r) => r.p99)) };
  console.log(
    `  over ${ROUNDS} rounds: gateway ${g.rps.toFixed(0)} req/s (median p99 ${g.p99} ms), bare ${x.rps.toFixed(0)} req/s (median p99 ${x.p99} ms)`,
  );
  console.log(`  ratio (gateway / bare): ${(g.rps / x.rps).toFixed(2)}× the throughput`);
  report(
    'notes_gateway_vs_bare',
    `GET /notes/{id} through the gateway vs bare Express + pg, c=${CONNECTIONS} (throughput ratio)`,
    g.rps / x.rps,
    '×',
  );
  report('notes_gateway_p99', `GET /notes/{id} p99 through the gateway, c=${CONNECTIONS}`, g.p99, 'ms', {
    value: 20,
    better: 'lower',
  });
  // CPU per request by process over all rounds (/proc): what the hop costs on any machine.
  const perRequest = (rows, kinds) =>
    (rows.reduce((a, r) => a + kinds.reduce((b, k) => b + (r.cpu.get(k) ?? 0), 0), 0) * 1000) /
    rows.reduce((a, r) => a + r.total, 0);
  // Not on the request's path: the load generator, this script (the bare server, idle meanwhile), Kafka.
  const generator = ['its finished children (load generator)', 'this script', 'kafka', 'other'];
  const gwKinds = [...new Set(gw.flatMap((r) => [...r.cpu.keys()]))].filter((k) => !generator.includes(k));
  const whole = perRequest(gw, gwKinds);
  const bareWhole = perRequest(bareRows, ['this script', 'postgresql']);
  const pgVia = perRequest(gw, ['postgresql']);
  const pgBare = perRequest(bareRows, ['postgresql']);
  console.log(
    `  CPU per request: through the gateway ${whole.toFixed(0)} µs (${gwKinds.join(', ')}), bare ${bareWhole.toFixed(0)} µs (Express ${perRequest(bareRows, ['this script']).toFixed(0)}, PostgreSQL ${pgBare.toFixed(0)})`,
  );
  report('notes_gateway_cpu', 'gateway process CPU per GET /notes/{id}', perRequest(gw, ['gateway']), 'µs', {
    value: 150,
    better: 'lower',
  });
  report('notes_service_cpu', 'notes-tasks process CPU per GetNote', perRequest(gw, ['notes-tasks']), 'µs', {
    value: 110,
    better: 'lower',
  });
  report(
    'notes_pg_cpu_vs_bare',
    'PostgreSQL CPU per GetNote, through the service ÷ bare handler',
    pgVia / pgBare,
    '×',
    {
      value: 1.1,
      better: 'lower',
    },
  );
  report('notes_cpu_vs_bare', 'whole path vs bare handler, CPU per request', whole / bareWhole, '×', {
    value: 2,
    better: 'lower',
  });
  report('notes_gateway_rps', 'GET /notes/{id} throughput through the gateway', g.rps, 'req/s');
  report('notes_bare_rps', 'GET /notes/{id} throughput of bare Express + pg', x.rps, 'req/s');
  report('notes_bare_p99', 'GET /notes/{id} p99 of bare Express + pg', x.p99, 'ms');
  if (process.env.WRITES === '1') {
    console.log(`POST /api/v1/notes (a note of ${body.length} characters), concurrency ${CONNECTIONS}, ${DURATION} s:`);
    await measure(
      'POST through the gateway',
      `${base}/api/v1/notes`,
      { authorization: `Bearer ${key}` },
      DURATION,
      WARMUP,
      { title: 'Bench note', body, metadata: { source: 'bench' } },
    );
  }
  for (const service of ['notes_tasks', 'identity']) await printTopStatements(databaseUrl(service), 6);
} finally {
  await check.end().catch(() => undefined);
  bare.close();
  await pool.end();
  await stack.stop();
}
