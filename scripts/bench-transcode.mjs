/**
 * CPU per request of the gateway's own request work, without the network: match the route, build
 * the request message from path, query and JSON body (shape and field rules, one pass), encode it.
 * A mix of five routes (create note, create task, get note, list tasks, patch task). Not a test,
 * and not part of `make bench`; compares two builds of the gateway on one machine in turns:
 *
 *   node scripts/bench-transcode.mjs [<gateway dist> …]     (default services/gateway/dist)
 *
 * e.g. `node scripts/bench-transcode.mjs /work/main/services/gateway/dist services/gateway/dist`
 * (each dist resolves its own @workauto/protos, so a build of main compares with main's protos).
 * Env: ROUNDS (6), N requests per round per build (20000).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dists = process.argv.slice(2).length ? process.argv.slice(2) : ['services/gateway/dist'];
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const N = Number(process.env.N ?? 20_000);
const ID = '0193a000-0000-7000-8000-000000000000';

const REQUESTS = [
  [
    'POST',
    '/api/v1/notes',
    {},
    { title: 'Kickoff', body: 'Budget and **timeline** for [[deal:' + ID + ']]', notebook_id: ID },
  ],
  [
    'POST',
    '/api/v1/tasks',
    {},
    { title: 'Call Dana', priority: 'high', due_date: '2026-12-31', assignee_id: ID, estimation_minutes: 30 },
  ],
  ['GET', `/api/v1/notes/${ID}`, {}, undefined],
  ['GET', '/api/v1/tasks', { limit: '50', completed: 'false' }, undefined],
  ['PATCH', `/api/v1/tasks/${ID}`, {}, { title: 'Call Dana back', due_date: null }],
];

async function load(dist) {
  const dir = pathToFileURL(resolve(dist)).href;
  const { loadRoutes, matchRoute } = await import(`${dir}/routes.js`);
  const { buildRequest } = await import(`${dir}/transcode.js`);
  const routes = await loadRoutes();
  const work = REQUESTS.map(([method, path, query, body]) => {
    const match = matchRoute(routes, method, path);
    if (!match?.route) throw new Error(`${dist}: no route for ${method} ${path}`);
    return { method, path, query, body };
  });
  return () => {
    for (let i = 0; i < N; i += work.length) {
      for (const { method, path, query, body } of work) {
        const { route, params } = matchRoute(routes, method, path);
        // The body as express.json() hands it over: a fresh object per request.
        const request = buildRequest(route, params, query, body === undefined ? undefined : structuredClone(body));
        route.requestType.encode(request);
      }
    }
  };
}

const runs = [];
for (const dist of dists) runs.push({ dist, run: await load(dist), micros: [] });
for (const r of runs) r.run(); // warm up: codecs, validators' plans, JIT
for (let round = 0; round < ROUNDS; round++) {
  for (const r of round % 2 ? [...runs].reverse() : runs) {
    const before = process.cpuUsage();
    r.run();
    const used = process.cpuUsage(before);
    r.micros.push((used.user + used.system) / N);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const r of runs)
  console.log(`${r.dist}: ${median(r.micros).toFixed(1)} µs CPU per request (median of ${ROUNDS} rounds of ${N})`);
