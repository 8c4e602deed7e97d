/**
 * A/B of two gateway builds on one stack: the stack's own gateway (A: services/gateway/dist) and a
 * second gateway process (B) started from another build with the same environment, in front of the
 * same services and databases. The load (GET /api/v1/notes/{id}, autocannon, c=CONNECTIONS) goes to
 * one of them at a time, in turns A B B A A B …, and each turn reads the CPU each gateway process
 * and notes-tasks used from /proc. Not a test, and not part of `make bench`.
 *
 * On a shared machine CPU per request moves by ±15 % between minutes with the other work; turns of
 * a few seconds, alternated, put both builds under the same conditions, which one bench-floor run
 * per build cannot. notes-tasks, the same process for both, is the control.
 *
 *   mkdir -p services/gateway/.data/b && cp -r services/gateway/dist services/gateway/migrations services/gateway/.data/b/
 *   (then check out and build the other version) and:
 *   B=services/gateway/.data/b/dist node deploy/embedded/dist/with-infra.js -- node scripts/bench-gateway-ab.mjs
 *
 * B lives under services/gateway/.data/ (git ignores .data/) so that it resolves the repo's
 * node_modules. A change in a lib the gateway imports is compared by copying that lib's build too:
 * `<B's parent>/node_modules/@workauto/<lib>/{package.json,dist}` is found before the repo's.
 * Env: B (required), CONNECTIONS (32), TURN seconds (5), PAIRS of turns (6).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { startBenchStack } from './lib-bench.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const AUTOCANNON = fileURLToPath(new URL('../node_modules/autocannon/autocannon.js', import.meta.url));
const B = process.env.B;
if (!B) {
  console.error('set B to the other gateway build, e.g. services/gateway/.data/b/dist (see the header)');
  process.exit(2);
}
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 32);
const TURN = Number(process.env.TURN ?? 5);
const PAIRS = Number(process.env.PAIRS ?? 6);

/** /proc/<pid>/stat fields after the command name. */
const stat = (pid) => {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return s.slice(s.lastIndexOf(')') + 2).split(' ');
};
const cpuMs = (pid) => (Number(stat(pid)[11]) + Number(stat(pid)[12])) * 10; // user + system, USER_HZ 100
const cmdline = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};
const environ = (pid) =>
  Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
const isOurs = (pid) => {
  for (let p = Number(pid), hops = 0; p > 1 && hops < 10; p = Number(stat(p)[1]), hops++)
    if (p === process.pid) return true;
  return false;
};
const findProcess = (script, env = () => true) =>
  readdirSync('/proc').find((p) => /^\d+$/.test(p) && cmdline(p).includes(script) && isOurs(p) && env(p));

const { stack, api, createTenant } = await startBenchStack({ shape: 'processes' });
let other;
try {
  const port = new URL(stack.url).port;
  const gatewayA = findProcess('services/gateway/dist/main.js', (p) => environ(p).PORT === port);
  const notesTasks = findProcess('services/notes-tasks/dist/main.js');
  if (!gatewayA || !notesTasks) throw new Error('the stack’s gateway or notes-tasks process was not found');
  const freePort = await new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  other = spawn(process.execPath, [`${B}/main.js`], {
    cwd: ROOT,
    env: { ...environ(gatewayA), PORT: String(freePort) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const urlB = `http://127.0.0.1:${freePort}`;
  for (
    const end = Date.now() + 60_000;
    !(await fetch(`${urlB}/readyz`).then(
      (r) => r.ok,
      () => false,
    ));
  ) {
    if (Date.now() > end || other.exitCode !== null) throw new Error(`gateway B (${B}) did not become ready`);
    await new Promise((r) => setTimeout(r, 100));
  }

  const key = (await createTenant()).api_key;
  const body = `# Weekly notes\n\n${'Discussed the roadmap with Dana and the budget. '.repeat(24)}`;
  const note = await api('POST', '/api/v1/notes', key, { title: 'Bench note', body, metadata: { source: 'bench' } });
  for (let i = 0; i < 200; i++) await api('POST', '/api/v1/notes', key, { title: `filler ${i}`, body: 'x' });
  const path = `/api/v1/notes/${note.id}`;
  const get = (base) => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.text());
  if ((await get(stack.url)) !== (await get(urlB))) throw new Error('A and B answer differently');

  const load = async (base, seconds) => {
    const args = [AUTOCANNON, '-c', String(CONNECTIONS), '-d', String(seconds), '-j'];
    const child = spawn(process.execPath, [...args, '-H', `authorization=Bearer ${key}`, `${base}${path}`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await once(child, 'exit');
    return JSON.parse(out);
  };
  const targets = {
    A: { label: 'services/gateway/dist', base: stack.url, pid: gatewayA, turns: [] },
    B: { label: B, base: urlB, pid: String(other.pid), turns: [] },
  };
  for (const t of Object.values(targets)) await load(t.base, 3); // warm-up
  console.log(`GET /api/v1/notes/{id}, c=${CONNECTIONS}, ${PAIRS} pairs of ${TURN} s turns:`);
  for (let i = 0; i < PAIRS; i++) {
    for (const name of i % 2 ? ['B', 'A'] : ['A', 'B']) {
      const t = targets[name];
      const g = cpuMs(t.pid);
      const n = cpuMs(notesTasks);
      const r = await load(t.base, TURN);
      const requests = r.requests.total;
      if (r.non2xx + r.errors + r.timeouts > 0) throw new Error(`${name}: requests failed`);
      const turn = {
        gateway: ((cpuMs(t.pid) - g) * 1000) / requests,
        notesTasks: ((cpuMs(notesTasks) - n) * 1000) / requests,
        rps: requests / TURN,
        p99: r.latency.p99,
      };
      t.turns.push(turn);
      console.log(
        `  ${name}: gateway ${turn.gateway.toFixed(0)} µs, notes-tasks ${turn.notesTasks.toFixed(0)} µs per request, ${turn.rps.toFixed(0)} req/s, p99 ${turn.p99} ms`,
      );
    }
  }
  const median = (v) => {
    const s = [...v].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  for (const [name, t] of Object.entries(targets)) {
    const m = (k) => median(t.turns.map((x) => x[k]));
    console.log(
      `${name} (${t.label}): median gateway ${m('gateway').toFixed(0)} µs, notes-tasks ${m('notesTasks').toFixed(0)} µs per request, ${m('rps').toFixed(0)} req/s, p99 ${m('p99')} ms`,
    );
  }
  const paired = targets.A.turns.map((a, i) => a.gateway - targets.B.turns[i].gateway);
  console.log(
    `A − B, gateway, turn by turn: ${paired.map((d) => d.toFixed(0)).join(', ')} µs; median ${median(paired).toFixed(0)} µs`,
  );
} finally {
  if (other && other.exitCode === null) {
    other.kill('SIGTERM');
    await once(other, 'exit');
  }
  await stack.stop();
}
