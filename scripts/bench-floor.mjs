/**
 * The floor of the stack (docs/benchmarks.md, "The floor"): CPU per GET /api/v1/notes/{id} of
 *   F0    bare Express + pg (one process: the SELECT, JSON out);
 *   F1    the least the design allows: Express → grpc-js client (a deadline on each call) →
 *         grpc-js server with the ts-proto codec → pg, in two processes (no auth, no limits, no
 *         caller token, no call wrapper);
 *   path  the product: the gateway and notes-tasks processes (with identity and the rest running).
 * The three take turns (F0, F1, path; ROUNDS rounds of TURN seconds each, after a warm-up), so the
 * machine's other load weighs on all alike, and each turn reads every process's CPU (user + system)
 * from /proc; the load generator (autocannon, a child process) is reported apart. Each figure is
 * the median over the rounds. Not a test.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-floor.mjs
 *
 * It ends with `path/F1 <ratio>x`, `gateway-F1 <µs> us`, `service-F1 <µs> us` and
 * `postgresql path/F1 <ratio>x`. Env: CONNECTIONS (32), TURN (4 s), ROUNDS (8), WARMUP (3 s); TARGETS
 * (e.g. `F1,A,B`: only these take turns, for a quicker A/B; the path's lines need F1 and path);
 * RATE (requests per second, all connections together; default none: as fast as each target
 * answers). CPU per request falls as the rate rises (more work per turn of each event loop, more
 * frames per write), so an A/B whose arms run at different rates also measures that: a RATE both
 * arms sustain compares them at the same one. WORKAUTO_PG_STAT_STATEMENTS=1: the rounds' requests per
 * target and notes_tasks' top statements (calls per request, planning: what the load does not move).
 *
 * A/B of a change in one sitting: AB names two built checkouts of the repository (e.g. this one
 * and a git worktree of main after `make build`); the gateway and notes-tasks of each run beside
 * the product's, started alike with its environment (the same databases, identity and keys), as
 * targets `A` and `B`, and the run ends with their differences round by round:
 *   AB=$PWD,/path/to/main/checkout node deploy/embedded/dist/with-infra.js -- node scripts/bench-floor.mjs
 * AB_TOGETHER=1: A and B take their turn at the same time (each at RATE, if given), so the load
 * the rest of the machine puts on them is the same, instant by instant (then PostgreSQL's and
 * identity's CPU, which they share, is divided among both arms' requests: compare the gateways
 * and the services). AB_ENV sets variables of both arms' processes, e.g. production's settings:
 * `AB_ENV=LOG_LEVEL=info,METRICS_PORT=0` (the chart's defaults: an access-log line per request, the
 * arms' output discarded; Prometheus metrics, so OpenTelemetry and its instrumentations run, on a
 * port of their own). The product's processes log at warn and run no telemetry (lib-bench).
 */
import { fork, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort } from '@workauto/testing';
import { keepNextTickRecord } from '@workauto/service/tick-records';
import { cpuDelta, cpuSnapshot, printTopStatements, report, startBenchStack, statementsSince } from './lib-bench.mjs';

const ROLE = process.argv[2] === '--role' ? process.argv[3] : undefined;
const COLUMNS =
  'id, tenant_id, title, body, is_archived, is_pinned, metadata, notebook_id, source_url, word_count, created_at, updated_at, deleted_at';
const FIND_NOTE = `SELECT ${COLUMNS} FROM notes WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The note as the API shows it (hand-written mapping: what transcoding is compared with). */
const noteJson = (n) => ({
  id: n.id,
  tenant_id: n.tenant_id,
  title: n.title,
  body: n.body,
  is_archived: n.is_archived,
  is_pinned: n.is_pinned,
  metadata: n.metadata,
  notebook_id: n.notebook_id ?? null,
  source_url: n.source_url ?? null,
  word_count: n.word_count,
  created_at: n.created_at.toISOString(),
  updated_at: n.updated_at.toISOString(),
  deleted_at: null,
});

if (ROLE) await serve(ROLE);
else await main();

/** A floor process: listens, sends its port to the parent, serves until the parent disconnects. */
async function serve(role) {
  // As every process of the product does (libs/service main): the floor is the same stack's.
  keepNextTickRecord();
  const env = JSON.parse(process.env.FLOOR_ENV);
  let port;
  if (role === 'f1-service') {
    const grpc = await import('@grpc/grpc-js');
    const { NotesTasksServiceService } = await import('@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js');
    const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 10 });
    const server = new grpc.Server({ 'grpc.enable_channelz': 0 });
    const getNote = NotesTasksServiceService.getNote;
    server.addService(
      { getNote },
      {
        getNote: (call, callback) => {
          const tenant = call.metadata.get('x-tenant-id')[0];
          pool.query({ name: 'floor_find_note', text: FIND_NOTE, values: [tenant, call.request.id] }).then(
            ({ rows: [row] }) => {
              if (!row) return callback({ code: grpc.status.NOT_FOUND, details: 'note not found' });
              callback(null, {
                ...row,
                notebook_id: row.notebook_id ?? undefined,
                source_url: row.source_url ?? undefined,
                deleted_at: undefined,
              });
            },
            (err) => callback({ code: grpc.status.UNAVAILABLE, details: String(err.message) }),
          );
        },
      },
    );
    port = await new Promise((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
  } else {
    const express = (await import('express')).default;
    const app = express();
    app.disable('x-powered-by');
    app.disable('etag');
    if (role === 'f0') {
      const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 10 });
      app.get('/api/v1/notes/:id', async (req, res) => {
        if (!UUID.test(req.params.id)) return void res.status(400).json({ error: 'bad id' });
        try {
          const { rows } = await pool.query({
            name: 'floor_find_note',
            text: FIND_NOTE,
            values: [env.tenantId, req.params.id],
          });
          if (!rows[0]) return void res.status(404).json({ error: 'not found' });
          res.json(noteJson(rows[0]));
        } catch {
          res.status(503).json({ error: 'unavailable' });
        }
      });
    } else {
      const grpc = await import('@grpc/grpc-js');
      const { NotesTasksServiceService } = await import('@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js');
      const client = new grpc.Client(`127.0.0.1:${env.servicePort}`, grpc.credentials.createInsecure(), {
        'grpc.enable_channelz': 0,
      });
      const { path, requestSerialize, responseDeserialize } = NotesTasksServiceService.getNote;
      app.get('/api/v1/notes/:id', (req, res) => {
        if (!UUID.test(req.params.id)) return void res.status(400).json({ error: 'bad id' });
        const metadata = new grpc.Metadata();
        metadata.set('x-tenant-id', env.tenantId);
        client.makeUnaryRequest(
          path,
          requestSerialize,
          responseDeserialize,
          { id: req.params.id },
          metadata,
          { deadline: Date.now() + 5_000 },
          (err, note) => {
            if (err)
              return void res.status(err.code === grpc.status.NOT_FOUND ? 404 : 503).json({ error: err.details });
            res.json(noteJson(note));
          },
        );
      });
    }
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = server.address().port;
  }
  process.send({ port });
  process.on('disconnect', () => process.exit(0));
}

async function main() {
  const CONNECTIONS = Number(process.env.CONNECTIONS ?? 32);
  const TURN = Number(process.env.TURN ?? 4);
  const ROUNDS = Number(process.env.ROUNDS ?? 8);
  const WARMUP = Number(process.env.WARMUP ?? 3);
  const RATE = Number(process.env.RATE ?? 0);
  const AUTOCANNON = fileURLToPath(new URL('../node_modules/autocannon/autocannon.js', import.meta.url));
  const SELF = fileURLToPath(import.meta.url);

  const { stack, api, createTenant, databaseUrl } = await startBenchStack({ shape: 'processes' });
  const children = [];
  const start = async (role, env) => {
    const child = fork(SELF, ['--role', role], {
      // The title is how lib-bench's cpuSnapshot tells the processes apart; PROFILE_NODE_OPTIONS
      // profiles F0 and F1 as it does the product's processes, to set one beside the other.
      execArgv: [`--title=role:${role}`, ...(process.env.PROFILE_NODE_OPTIONS?.split(/\s+/).filter(Boolean) ?? [])],
      env: { ...process.env, FLOOR_ENV: JSON.stringify(env) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    children.push(child);
    const [{ port }] = await once(child, 'message');
    return port;
  };
  try {
    const tenant = await createTenant();
    const key = tenant.api_key;
    const body = `# Weekly notes\n\n${'Discussed the roadmap with [[contact:0193a1b2-0000-7000-8000-00000000000a|Dana]] and the budget. '.repeat(12)}`;
    const note = await api('POST', '/api/v1/notes', key, { title: 'Bench note', body, metadata: { source: 'bench' } });
    for (let i = 0; i < 200; i++) await api('POST', '/api/v1/notes', key, { title: `filler ${i}`, body: 'x' });
    const notesUrl = databaseUrl('notes_tasks');
    const check = new pg.Client({ connectionString: notesUrl });
    await check.connect();
    await check.query('VACUUM ANALYZE notes');
    await check.end();

    const env = { databaseUrl: notesUrl, tenantId: tenant.tenant.id };
    const f0 = await start('f0', env);
    const servicePort = await start('f1-service', env);
    const f1 = await start('f1-gateway', { ...env, servicePort });
    const path = `/api/v1/notes/${note.id}`;
    const ab = process.env.AB?.split(',') ?? [];
    if (ab.length && ab.length !== 2) throw new Error('AB names two checkouts: AB=<dir of A>,<dir of B>');
    const arms = [];
    for (const [i, dir] of ab.entries())
      arms.push({ name: 'AB'[i], dir, url: await startArm(dir, 'AB'[i], stack.url, children) });
    const targets = [
      { name: 'F0', url: `http://127.0.0.1:${f0}${path}`, headers: {}, front: 'f0', service: undefined },
      { name: 'F1', url: `http://127.0.0.1:${f1}${path}`, headers: {}, front: 'f1-gateway', service: 'f1-service' },
      {
        name: 'path',
        url: `${stack.url}${path}`,
        headers: { authorization: `Bearer ${key}` },
        front: 'gateway',
        service: 'notes-tasks',
      },
    ];
    for (const arm of arms)
      targets.push({
        name: arm.name,
        url: `${arm.url}${path}`,
        headers: { authorization: `Bearer ${key}` },
        front: `${arm.name}-gateway`,
        service: `${arm.name}-notes-tasks`,
      });
    const only = process.env.TARGETS?.split(',');
    if (only) targets.splice(0, targets.length, ...targets.filter((t) => only.includes(t.name)));
    // The same note from every target.
    const answers = await Promise.all(targets.map((t) => fetch(t.url, { headers: t.headers }).then((r) => r.json())));
    for (const [i, a] of answers.entries())
      if (a.id !== note.id || a.body !== body || a.title !== note.title)
        throw new Error(`${targets[i].name} answers differently: ${JSON.stringify(a).slice(0, 300)}`);

    const load = async (t, seconds) => {
      const args = [AUTOCANNON, '-c', String(CONNECTIONS), '-d', String(seconds), '-j'];
      if (RATE) args.push('--overallRate', String(RATE));
      for (const [k, v] of Object.entries(t.headers)) args.push('-H', `${k}=${v}`);
      const child = spawn(process.execPath, [...args, t.url], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const [code] = await once(child, 'exit');
      if (code !== 0) throw new Error(`autocannon exited with ${code}`);
      return JSON.parse(out);
    };
    for (const t of targets) await load(t, WARMUP);
    await statementsSince(notesUrl); // WORKAUTO_PG_STAT_STATEMENTS=1: count the rounds' statements only

    const loadBefore = loadavg()[0];
    console.log(
      `GET /api/v1/notes/{id}, c=${CONNECTIONS}, ${ROUNDS} rounds of ${TURN} s turns (F0, F1, path), load average ${loadBefore.toFixed(2)}:`,
    );
    const GENERATOR = 'its finished children (load generator)';
    const together = arms.length === 2 && process.env.AB_TOGETHER === '1';
    if (together)
      targets.push(
        ...targets.splice(
          targets.findIndex((t) => t.name === 'B'),
          1,
        ),
      ); // B last: A's partner
    const turns = new Map(targets.map((t) => [t.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? [...targets].reverse() : targets;
      // AB_TOGETHER: the two arms take their turn at once, so whatever else the machine does weighs on both alike.
      const groups = [];
      for (const t of order)
        if (!(together && t.name === 'B')) groups.push(together && t.name === 'A' ? [t, targets.at(-1)] : [t]);
      for (const group of groups) {
        const before = cpuSnapshot();
        const results = await Promise.all(group.map((t) => load(t, TURN)));
        const spent = cpuDelta(before, cpuSnapshot());
        const all = results.reduce((sum, r) => sum + r.requests.total, 0);
        for (const [i, t] of group.entries()) {
          const r = results[i];
          const n = r.requests.total;
          if (r.non2xx + r.errors + r.timeouts > 0) throw new Error(`${t.name}: requests failed`);
          const us = (k) => ((spent.get(k) ?? 0) * 1000) / n;
          // What both arms share (PostgreSQL, identity, the load generators) is divided among all their requests.
          const shared = (k) => ((spent.get(k) ?? 0) * 1000) / all;
          const turn = {
            front: us(t.front),
            service: t.service ? us(t.service) : 0,
            identity: t.front.endsWith('gateway') && t.front !== 'f1-gateway' ? shared('identity') : 0,
            postgresql: shared('postgresql'),
            generator: shared(GENERATOR),
            rps: n / TURN,
            p99: r.latency.p99,
          };
          turn.total = turn.front + turn.service + turn.identity + turn.postgresql;
          turns.get(t.name).push(turn);
          console.log(
            `  ${t.name.padEnd(4)} front ${turn.front.toFixed(0).padStart(4)} µs  service ${turn.service.toFixed(0).padStart(4)} µs  postgresql ${turn.postgresql.toFixed(0).padStart(3)} µs  total ${turn.total.toFixed(0).padStart(4)} µs  (load generator ${turn.generator.toFixed(0)} µs)  ${turn.rps.toFixed(0)} req/s  p99 ${turn.p99} ms`,
          );
        }
      }
    }
    const requests = [...turns].map(([name, v]) => `${name} ${v.reduce((sum, t) => sum + t.rps * TURN, 0)}`);
    if (process.env.WORKAUTO_PG_STAT_STATEMENTS === '1') {
      console.log(`\nrequests in the rounds: ${requests.join(', ')}`);
      await printTopStatements(notesUrl, 8);
    }
    const median = (v) => {
      const s = [...v].sort((a, b) => a - b);
      return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    };
    const m = Object.fromEntries(
      targets.map((t) => [
        t.name,
        Object.fromEntries(
          ['front', 'service', 'identity', 'postgresql', 'total', 'generator', 'rps', 'p99'].map((k) => [
            k,
            median(turns.get(t.name).map((x) => x[k])),
          ]),
        ),
      ]),
    );
    console.log(`\nCPU per request, µs, medians of ${ROUNDS} rounds (load average now ${loadavg()[0].toFixed(2)}):`);
    console.log('| chain | front (Express / gateway) | service | identity | PostgreSQL | total | × F0 | req/s |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const t of targets) {
      const x = m[t.name];
      console.log(
        `| ${t.name} | ${x.front.toFixed(0)} | ${t.service ? x.service.toFixed(0) : '—'} | ${['path', 'A', 'B'].includes(t.name) ? x.identity.toFixed(0) : '—'} | ${x.postgresql.toFixed(0)} | ${x.total.toFixed(0)} | ${m.F0 ? (x.total / m.F0.total).toFixed(2) : '—'} | ${x.rps.toFixed(0)} |`,
      );
    }
    if (arms.length) {
      const paired = (k) =>
        median(turns.get('A').map((a, i) => a[k] - turns.get('B')[i][k]))
          .toFixed(0)
          .padStart(4);
      console.log(`A = ${arms[0].dir}, B = ${arms[1].dir}`);
      console.log(
        `A − B, round by round, medians: gateway ${paired('front')} µs, notes-tasks ${paired('service')} µs, PostgreSQL ${paired('postgresql')} µs, total ${paired('total')} µs`,
      );
      if (m.F1)
        console.log(`A/F1 ${(m.A.total / m.F1.total).toFixed(2)}x, B/F1 ${(m.B.total / m.F1.total).toFixed(2)}x`);
    }
    if (!m.F1 || !m.path) return; // TARGETS left the floor or the path out
    const ratio = m.path.total / m.F1.total;
    const gatewayOver = m.path.front - m.F1.front;
    const serviceOver = m.path.service - m.F1.service;
    const pgRatio = m.path.postgresql / m.F1.postgresql;
    if (m.F0)
      console.log(
        `load generator apart: ${m.F0.generator.toFixed(0)} / ${m.F1.generator.toFixed(0)} / ${m.path.generator.toFixed(0)} µs per request (F0 / F1 / path)`,
      );
    const targets36 = [
      ['floor_path_vs_f1', 'GET /notes/{id} CPU per request, the real path ÷ F1 (the floor)', ratio, '×', 1.15],
      ['floor_gateway_over_f1', 'gateway CPU per request above F1’s Express + grpc-js client', gatewayOver, 'µs', 35],
      ['floor_service_over_f1', 'notes-tasks CPU per GetNote above F1’s grpc-js server', serviceOver, 'µs', 15],
      ['floor_pg_vs_f1', 'PostgreSQL CPU per GetNote, the real path ÷ F1', pgRatio, '×', 1.1],
    ];
    for (const [id, label, value, unit, target] of targets36)
      report(id, label, value, unit, { value: target, better: 'lower' });
    if (m.F0)
      report(
        'floor_f1_vs_f0',
        'F1 (the floor) ÷ F0 (bare Express + pg), CPU per request',
        m.F1.total / m.F0.total,
        '×',
      );
    console.log(`path/F1 ${ratio.toFixed(2)}x`);
    console.log(`gateway-F1 ${gatewayOver.toFixed(0)} us`);
    console.log(`service-F1 ${serviceOver.toFixed(0)} us`);
    console.log(`postgresql path/F1 ${pgRatio.toFixed(2)}x`);
  } finally {
    for (const c of children) if (c.connected) c.disconnect();
    for (const c of children) if (!c.connected && c.exitCode === null) c.kill('SIGTERM');
    await stack.stop();
  }
}

/** AB_ENV (`KEY=value,KEY=value`) as an object. */
function abEnv() {
  return Object.fromEntries(
    (process.env.AB_ENV ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

/** /proc/<pid>/environ as an object. */
function environ(pid) {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/**
 * One arm of an A/B: the gateway and notes-tasks of the checkout `dir`, with the environment of the
 * product's own processes (found in /proc under this script); resolves to its gateway's URL once
 * that is ready.
 */
async function startArm(dir, name, stackUrl, children) {
  const mine = (pid) => {
    for (let p = Number(pid), hops = 0; p > 1 && hops < 10; hops++) {
      if (p === process.pid) return true;
      const s = readFileSync(`/proc/${p}/stat`, 'utf8');
      p = Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
    }
    return false;
  };
  const find = (script, test = () => true) =>
    readdirSync('/proc').find((p) => {
      if (!/^\d+$/.test(p)) return false;
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(script) && mine(p) && test(p);
      } catch {
        return false;
      }
    });
  const gateway = find('services/gateway/dist/main.js', (p) => environ(p).PORT === new URL(stackUrl).port);
  const notesTasks = find('services/notes-tasks/dist/main.js');
  if (!gateway || !notesTasks) throw new Error('the product’s gateway or notes-tasks process was not found');
  const run = (service, role, env) => {
    const child = spawn(process.execPath, [`--title=role:${role}`, `${dir}/services/${service}/dist/main.js`], {
      cwd: dir,
      env,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    return child;
  };
  const servicePort = await freePort();
  run('notes-tasks', `${name}-notes-tasks`, {
    ...environ(notesTasks),
    ...abEnv(),
    GRPC_PORT: String(servicePort),
  });
  const port = await freePort();
  const gw = run('gateway', `${name}-gateway`, {
    ...environ(gateway),
    ...abEnv(),
    PORT: String(port),
    NOTES_TASKS_ADDR: `127.0.0.1:${servicePort}`,
  });
  const url = `http://127.0.0.1:${port}`;
  for (const end = Date.now() + 60_000; ;) {
    if (
      await fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return url;
    if (Date.now() > end || gw.exitCode !== null) throw new Error(`${name}’s gateway (${dir}) did not become ready`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
