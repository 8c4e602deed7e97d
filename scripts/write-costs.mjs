/**
 * The API mix's writes one by one, each in a loop over real gRPC against its service on a fresh
 * database (docs/benchmarks.md, "Changes of issue 36"): µs per write of the process that runs the
 * service and its client (the service's relay included), of PostgreSQL (the run's backends, by
 * lib-bench's cpuSnapshot), and of wall time, at one write in flight. Each kind runs ROUNDS rounds
 * in a child process of its own per build; with AB the two builds take turns (A B, then B A, …)
 * and the run ends with their medians and the pairs' differences, so an A/B of a change to a
 * write's statements is read in one sitting. Not a test, and not part of `make bench` (which runs
 * scripts/bench-*.mjs): it has no target, and takes four minutes.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/write-costs.mjs
 *   AB=$PWD,/path/to/other/checkout node deploy/embedded/dist/with-infra.js -- node scripts/write-costs.mjs
 *
 * Env: KINDS (create-task,update-task,create-note,move-deal), N (2,000 writes per round, after 400
 * to warm up), ROUNDS (4), AB (two built checkouts of the repository, A first).
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { cpuDelta, cpuSnapshot } from './lib-bench.mjs';

const KINDS = {
  'create-task': { service: 'notes-tasks', start: 'startNotesTasks' },
  'update-task': { service: 'notes-tasks', start: 'startNotesTasks' },
  'create-note': { service: 'notes-tasks', start: 'startNotesTasks' },
  'move-deal': { service: 'crm-pipelines', start: 'startCrm' },
};

if (process.argv[2] === '--role') await measure(process.argv[3], process.argv[4]);
else await main();

async function main() {
  const kinds = (process.env.KINDS ?? Object.keys(KINDS).join(',')).split(',');
  const unknown = kinds.filter((k) => !KINDS[k]);
  if (unknown.length) throw new Error(`unknown KINDS ${unknown.join(', ')}: use ${Object.keys(KINDS).join(', ')}`);
  const ROUNDS = Number(process.env.ROUNDS ?? 4);
  const N = Number(process.env.N ?? 2000);
  const here = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
  const arms = (process.env.AB ?? here).split(',');
  for (const kind of kinds) {
    const results = arms.map(() => []);
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 ? [...arms.keys()].reverse() : [...arms.keys()];
      for (const a of order) {
        const child = fork(fileURLToPath(import.meta.url), ['--role', kind, arms[a]], {
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        await once(child, 'message'); // warmed up
        // PostgreSQL's CPU from this run's processes (a backend that exits meanwhile keeps its share).
        const before = cpuSnapshot();
        child.send('go');
        const [result] = await once(child, 'message');
        const postgresMs = cpuDelta(before, cpuSnapshot()).get('postgresql') ?? 0;
        await once(child, 'exit');
        result.postgresql_us = Math.round((postgresMs * 1000) / N);
        results[a].push(result);
        console.log(`${kind} round ${r + 1} ${arms.length > 1 ? 'AB'[a] : ''} ${JSON.stringify(result)}`);
      }
    }
    const median = (xs) => {
      const s = [...xs].sort((x, y) => x - y);
      return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    };
    for (const field of ['service_us', 'postgresql_us', 'wall_us']) {
      const medians = results.map((rs) => median(rs.map((x) => x[field])));
      const pairs =
        arms.length > 1 ? ` A − B by round ${results[0].map((x, i) => x[field] - results[1][i][field]).join(' ')}` : '';
      console.log(
        `${kind} ${field} median ${arms.length > 1 ? `A ${medians[0]} B ${medians[1]}` : medians[0]}${pairs}`,
      );
    }
  }
}

/** One round of one kind in this process: N writes at one in flight, then the figures to the parent. */
async function measure(kind, root) {
  const { service, start } = KINDS[kind];
  const support = await import(`${root}/services/${service}/dist/test-support.js`);
  const N = Number(process.env.N ?? 2000);
  const it = await support[start]();
  const S = support.S;
  const t = support.tenant();
  let write;
  if (kind === 'create-task') write = (i) => it.client.call(S.createTask, { title: `task ${i}` }, t.call);
  else if (kind === 'create-note')
    write = (i) => it.client.call(S.createNote, { title: `note ${i}`, body: 'written in a loop' }, t.call);
  else if (kind === 'update-task') {
    const ids = [];
    for (let i = 0; i < 50; i++) ids.push((await it.client.call(S.createTask, { title: `task ${i}` }, t.call)).id);
    write = (i) => it.client.call(S.updateTask, { id: ids[i % 50], title: `renamed ${i}` }, t.call);
  } else {
    const p = await it.client.call(S.createPipeline, { name: 'Sales', stages: support.SALES_STAGES }, t.call);
    const ids = [];
    for (let i = 0; i < 50; i++)
      ids.push((await it.client.call(S.createDeal, { title: `deal ${i}`, amount: 100 }, t.call)).id);
    // Each deal goes round its pipeline's three later open-or-won stages: every write moves it.
    write = (i) =>
      it.client.call(S.updateDeal, { id: ids[i % 50], stage_id: p.stages[1 + (Math.floor(i / 50) % 3)].id }, t.call);
  }
  let i = 0;
  const run = async (n) => {
    for (const end = i + n; i < end; i++) await write(i);
  };
  await run(400);
  process.send('warmed up');
  await once(process, 'message'); // the parent has read PostgreSQL's CPU
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  await run(N);
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - wall0;
  process.send({ service_us: Math.round((cpu.user + cpu.system) / N), wall_us: Math.round((wall * 1000) / N) });
  await it.stop();
  process.exit(0);
}
