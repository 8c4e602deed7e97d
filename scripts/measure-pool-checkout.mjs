/**
 * CPU of a tenant's `pool.query` (libs/db's tenant-fair pool: the share's slot, the checkout, one
 * prepared `SELECT 1`), two builds of libs/db in one process, alternating rounds: what the pool
 * adds per query on the service's side, without the rest of a request around it
 * (docs/benchmarks.md, "Changes of issue 36"). Not a test.
 *
 *   node deploy/embedded/dist/with-infra.js -- node scripts/measure-pool-checkout.mjs <checkout A> <checkout B>
 *
 * Env: N (queries per round, 20,000), ROUNDS (10); 16 callers at once, each in a tenant's scope.
 */
const dirs = process.argv.slice(2);
if (dirs.length !== 2) throw new Error('name two built checkouts: measure-pool-checkout.mjs <A> <B>');
const N = Number(process.env.N ?? 20_000);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const CALLERS = 16;
const libs = await Promise.all(dirs.map((d) => import(`${d}/libs/db/dist/index.js`)));
const pools = libs.map((l) => l.createPool(process.env.TEST_DATABASE_URL, { max: 8 }));

/** µs of this process's CPU per query. */
async function round(i) {
  let left = N;
  const start = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CALLERS }, () =>
      libs[i].runForTenant('tenant', async () => {
        while (left-- > 0) await pools[i].query({ name: 'measure_one', text: 'SELECT 1 AS x', values: [] });
      }),
    ),
  );
  const used = process.cpuUsage(start);
  return (used.user + used.system) / N;
}

try {
  for (const i of [0, 1]) await round(i); // warm-up
  const us = [[], []];
  for (let r = 0; r < ROUNDS; r++) for (const i of r % 2 ? [1, 0] : [0, 1]) us[i].push(await round(i));
  const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
  const pairs = us[0].map((a, r) => a - us[1][r]);
  console.log(`µs of CPU per pool.query in a tenant's scope, medians of ${ROUNDS} rounds of ${N}:`);
  console.log(`  A ${median(us[0]).toFixed(1)}  (${dirs[0]})`);
  console.log(`  B ${median(us[1]).toFixed(1)}  (${dirs[1]})`);
  console.log(
    `  A − B ${median(pairs).toFixed(1)}; rounds ${pairs.map((d) => d.toFixed(1)).join(' ')}; ${pairs.filter((d) => d < 0).length} of ${ROUNDS} lower`,
  );
} finally {
  await Promise.all(pools.map((p) => p.end()));
}
