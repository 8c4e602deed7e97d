/**
 * Client CPU per execution of a prepared SELECT on one connection, with pg's own query-config
 * normalization (a copy of the config with its property descriptors) and with libs/db's
 * (query-config.ts: the fields Query reads), alternating in one process (docs/benchmarks.md,
 * "Changes of issue 36"). Not a test.
 *
 *   node deploy/embedded/dist/with-infra.js -- node scripts/measure-query-config.mjs
 *
 * Env: N (queries per round, 5,000), ROUNDS (10).
 */
import pg from 'pg';

const N = Number(process.env.N ?? 5_000);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const pgOwn = pg.utils.normalizeQueryConfig;
// libs/db installs its normalization when it is first imported.
const { createPool, ensureDatabase } = await import('@workauto/db');
const libsDb = pg.utils.normalizeQueryConfig;
if (libsDb === pgOwn) throw new Error("libs/db did not replace pg's normalizeQueryConfig");
const server = process.env.TEST_DATABASE_URL;
if (!server) throw new Error('TEST_DATABASE_URL is not set: run this through with-infra');
const pool = createPool(await ensureDatabase(server, 'measure_query_config'), { max: 1 });
const client = await pool.connect();
const select = (i) => ({ name: 'measure_query_config', text: 'SELECT $1::int AS n', values: [i] });
for (let i = 0; i < 2_000; i++) await client.query(select(i)); // warm-up

const results = { 'pg 8.23': [], 'libs/db': [] };
const arms = [
  ['pg 8.23', pgOwn],
  ['libs/db', libsDb],
];
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, normalize] of r % 2 ? [...arms].reverse() : arms) {
    pg.utils.normalizeQueryConfig = normalize;
    const start = process.cpuUsage();
    for (let i = 0; i < N; i++) await client.query(select(i));
    const used = process.cpuUsage(start);
    results[name].push((used.user + used.system) / N);
  }
}
pg.utils.normalizeQueryConfig = libsDb;
client.release();
await pool.end();
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const [name, xs] of Object.entries(results))
  console.log(
    `${name}: ${median(xs).toFixed(1)} µs of client CPU per query (rounds ${xs.map((x) => x.toFixed(1)).join(' ')})`,
  );
