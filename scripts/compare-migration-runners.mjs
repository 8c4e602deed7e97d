/**
 * The migration runner (libs/db migrations.ts, libs/service migrate.ts) against node-pg-migrate, on
 * the run's PostgreSQL: each check runs both on a fresh database with the same .sql files and prints
 * what happened. Not a test, and not part of `make bench` (docs/decisions.md, "Our own
 * infrastructure against the libraries", has the results).
 *
 *   make build && WORKAUTO_KAFKA=off node deploy/embedded/dist/with-infra.js -- node scripts/compare-migration-runners.mjs [check…]
 *
 * Checks (all by default): concurrent, stuck-holder, pgbouncer, concurrently, folders, lock-timeout,
 * statement-timeout, read-only (each described above its function).
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createPool, pendingMigrations, runMigrations } from '@workauto/db';
import { findPgBouncer, startPgBouncer } from '../libs/db/dist/pgbouncer-fixture.js';
import { freshDatabase, library, serverUrl, timed } from './lib-compare.mjs';

const { runner } = await library('node-pg-migrate');
const quiet = { info: () => undefined, warn: () => undefined };

async function folder(files) {
  const dir = await mkdtemp(join(tmpdir(), 'compare-migrations-'));
  for (const [name, sql] of Object.entries(files)) await writeFile(join(dir, name), sql);
  return dir;
}

/** Ours, as a service's start runs it: a pool of the service's settings (or `pool`), the folders in order. */
async function ours(url, dirs, options = {}, poolOptions = {}) {
  const pool = createPool(url, { max: 3, ...poolOptions });
  try {
    return await runMigrations(pool, dirs, { logger: quiet, ...options });
  } finally {
    await pool.end();
  }
}

/** node-pg-migrate's runner over the same folders (a glob per folder: its way to read several). */
function npm(databaseUrl, dirs, options = {}) {
  return runner({
    databaseUrl,
    dir: dirs.map((d) => `${d}/*.sql`),
    useGlob: true,
    migrationsTable: 'pgmigrations',
    direction: 'up',
    log: () => undefined,
    ...options,
  });
}

/** A settled promise as one line. */
const outcome = (r, done = 'applied') =>
  r.status === 'fulfilled'
    ? `${done} ${JSON.stringify(Array.isArray(r.value) ? r.value.map((m) => m.name ?? m) : r.value)}`
    : `failed: ${String(r.reason?.message ?? r.reason)
        .replace(/\s+/g, ' ')
        .slice(0, 150)}`;

async function query(url, sql, params) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

const report = (check, subject, result) => console.log(`${check.padEnd(17)} ${subject.padEnd(44)} ${result}`);

/** Three slow files, each appending to a log table without a key: a file applied twice shows as a duplicate row. */
const SLOW_FILES = {
  '0001_log.sql': 'CREATE TABLE m_log (file text NOT NULL);',
  '0002_a.sql': "SELECT pg_sleep(0.3); INSERT INTO m_log VALUES ('0002');",
  '0003_b.sql': "SELECT pg_sleep(0.3); INSERT INTO m_log VALUES ('0003');",
};
const logRows = async (url) => (await query(url, 'SELECT file FROM m_log ORDER BY file')).map((r) => r.file).join(',');

/** Two processes start at once on a new database (two replicas rolling out). */
async function concurrent() {
  const dir = await folder(SLOW_FILES);
  const cases = [
    ['ours', (url) => ours(url, [dir])],
    ['node-pg-migrate (advisoryLockMode fail, default)', (url) => npm(url, [dir])],
    ['node-pg-migrate (advisoryLockMode wait)', (url) => npm(url, [dir], { advisoryLockMode: 'wait' })],
  ];
  for (const [label, run] of cases) {
    const url = await freshDatabase('mig');
    const runs = await Promise.allSettled([run(url), run(url)]);
    report('concurrent', label, `${runs.map((r) => outcome(r)).join(' | ')}; m_log: ${await logRows(url)}`);
  }
}

/** Another session holds the runner's lock for 4 s (a stuck or slow migrator): what a starting process does. */
async function stuckHolder() {
  const dir = await folder(SLOW_FILES);
  const cases = [
    [
      'ours (MIGRATION_LOCK_TIMEOUT_MS 1500)',
      "hashtext('workauto.migrations.runner')",
      (url) => ours(url, [dir], { lockTimeoutMs: 1_500 }),
    ],
    ['node-pg-migrate (wait)', '7241865325823964', (url) => npm(url, [dir], { advisoryLockMode: 'wait' })],
    ['node-pg-migrate (fail)', '7241865325823964', (url) => npm(url, [dir])],
  ];
  for (const [label, key, run] of cases) {
    const url = await freshDatabase('mig');
    const holder = new pg.Client({ connectionString: url, application_name: 'stuck-migrator' });
    await holder.connect();
    await holder.query(`SELECT pg_advisory_lock(${key})`);
    const release = sleep(4_000).then(() => holder.end());
    const { ms, result } = await timed(() => Promise.allSettled([run(url)]));
    await release;
    report('stuck-holder', label, `after ${(ms / 1000).toFixed(1)} s: ${outcome(result[0])}`);
  }
}

/**
 * Through PgBouncer in transaction mode with one server connection: the first file is applied (the
 * previous release), then two processes start at once with the next two.
 */
async function pgbouncer() {
  const found = findPgBouncer();
  if (!('binary' in found)) return report('pgbouncer', 'skipped', found.missing);
  const first = await folder({ '0001_log.sql': SLOW_FILES['0001_log.sql'] });
  const all = await folder(SLOW_FILES);
  const bouncer = await startPgBouncer(found.binary, serverUrl(), 1);
  try {
    const cases = [
      ['ours', (url, dir) => ours(url, [dir])],
      ['node-pg-migrate (fail)', (url, dir) => npm(url, [dir])],
      ['node-pg-migrate (wait)', (url, dir) => npm(url, [dir], { advisoryLockMode: 'wait' })],
    ];
    for (const [label, run] of cases) {
      const direct = await freshDatabase('mig');
      const url = bouncer.url(new URL(direct).pathname.slice(1));
      await run(url, first);
      const runs = await Promise.allSettled([run(url, all), run(url, all)]);
      report('pgbouncer', label, `${runs.map((r) => outcome(r)).join(' | ')}; m_log: ${await logRows(direct)}`);
    }
  } finally {
    await bouncer.stop();
  }
}

/** An index on an existing table, built without blocking writes (docs/operations.md, Upgrades). */
async function concurrently() {
  const dir = await folder({
    '0001_t.sql': 'CREATE TABLE t (a int);',
    '0002_t_a.sql': '-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS t_a ON t (a);',
  });
  for (const [label, run] of [
    ['ours', (url) => ours(url, [dir])],
    ['node-pg-migrate', (url) => npm(url, [dir])],
  ]) {
    const url = await freshDatabase('mig');
    const [r] = await Promise.allSettled([run(url)]);
    report('concurrently', label, outcome(r));
  }
}

/** A shared library's folder (applied first) gains a file after a service's later one was applied. */
async function folders() {
  const lib = await folder({ '0000_lib.sql': 'CREATE TABLE lib (a int);' });
  const service = await folder({
    '0001_svc.sql': 'CREATE TABLE svc (a int);',
    '0006_svc_more.sql': 'ALTER TABLE svc ADD COLUMN b int;',
  });
  for (const [label, run] of [
    ['ours', (url) => ours(url, [lib, service])],
    ['node-pg-migrate', (url) => npm(url, [lib, service])],
  ]) {
    const url = await freshDatabase('mig');
    await run(url);
    await writeFile(join(lib, '0005_lib_index.sql'), 'CREATE INDEX lib_a ON lib (a);');
    const [r] = await Promise.allSettled([run(url)]);
    report('folders', label, outcome(r));
    await import('node:fs/promises').then((fs) => fs.rm(join(lib, '0005_lib_index.sql')));
  }
}

/**
 * A session reads t in a transaction it keeps open for 3 s (a long report); the migration alters t;
 * 200 ms later the service reads t. How long that read waits, and what the migration did.
 */
async function lockTimeout() {
  const first = await folder({ '0001_t.sql': 'CREATE TABLE t (a int);' });
  const second = await folder({ '0002_t_b.sql': 'ALTER TABLE t ADD COLUMN b int;' });
  for (const [label, run] of [
    ['ours (lock_timeout 500 ms; default 10 s)', (url, dirs) => ours(url, dirs, { statementLockTimeoutMs: 500 })],
    ['node-pg-migrate', (url, dirs) => npm(url, dirs)],
  ]) {
    const url = await freshDatabase('mig');
    await run(url, [first]);
    const reader = new pg.Client({ connectionString: url });
    await reader.connect();
    await reader.query('BEGIN; SELECT count(*) FROM t');
    const ends = sleep(3_000)
      .then(() => reader.query('COMMIT'))
      .then(() => reader.end());
    const migration = Promise.allSettled([run(url, [first, second])]);
    await sleep(200);
    const { ms } = await timed(() => query(url, 'SELECT count(*) FROM t'));
    const [r] = await migration;
    await ends;
    report('lock-timeout', label, `the service's read waited ${Math.round(ms)} ms; migration ${outcome(r)}`);
  }
}

/** The services' connections carry statement_timeout (3 s; 500 ms here); one migration runs 1 s. */
async function statementTimeout() {
  const dir = await folder({ '0001_slow.sql': 'SELECT pg_sleep(1); CREATE TABLE slow (a int);' });
  for (const [label, run] of [
    ['ours, on the service pool', (url) => ours(url, [dir], {}, { statementTimeoutMs: 500 })],
    [
      'node-pg-migrate, same connection settings',
      (url) => npm({ connectionString: url, statement_timeout: 500 }, [dir]),
    ],
  ]) {
    const url = await freshDatabase('mig');
    const [r] = await Promise.allSettled([run(url)]);
    report('statement-timeout', label, outcome(r));
  }
}

/**
 * MIGRATE_ON_START=false: a process whose role has no DDL rights asks which migrations are missing
 * (and waits for them); once before the migrate Job ran, once while it runs.
 */
async function readOnly() {
  const dir = await folder(SLOW_FILES);
  const role = `reader_${process.pid}`;
  await query(serverUrl(), `DROP ROLE IF EXISTS ${role}; CREATE ROLE ${role} LOGIN PASSWORD 'reader'`);
  const as = (url) => Object.assign(new URL(url), { username: role, password: 'reader' }).toString();
  for (const [label, ask, migrate] of [
    [
      'ours (pendingMigrations)',
      async (url) => {
        const pool = createPool(url, { max: 1 });
        try {
          return await pendingMigrations(pool, [dir]);
        } finally {
          await pool.end();
        }
      },
      (url) => ours(url, [dir]),
    ],
    [
      'node-pg-migrate (dryRun)',
      async (url) => (await npm(url, [dir], { dryRun: true })).map((m) => m.name),
      (url) => npm(url, [dir]),
    ],
  ]) {
    const url = await freshDatabase('mig');
    await query(
      url,
      `REVOKE CREATE ON SCHEMA public FROM PUBLIC; GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role};
                      ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO ${role}`,
    );
    const [before] = await Promise.allSettled([ask(as(url))]);
    const job = migrate(url);
    await sleep(150);
    const [during] = await Promise.allSettled([ask(as(url))]);
    await job;
    report(
      'read-only',
      label,
      `before the Job: ${outcome(before, 'missing')} | during it: ${outcome(during, 'missing')}`,
    );
  }
}

const CHECKS = {
  concurrent,
  'stuck-holder': stuckHolder,
  pgbouncer,
  concurrently,
  folders,
  'lock-timeout': lockTimeout,
  'statement-timeout': statementTimeout,
  'read-only': readOnly,
};
const chosen = process.argv.slice(2);
for (const name of chosen.length ? chosen : Object.keys(CHECKS)) {
  if (!CHECKS[name]) throw new Error(`unknown check ${name}: one of ${Object.keys(CHECKS).join(', ')}`);
  await CHECKS[name]();
}
