/**
 * The migration runner against a real PostgreSQL: its lock (transaction-scoped, so it holds behind a
 * transaction pooler), the wait and the timeout an operator sees, files that cannot run in a
 * transaction, and what a failed file leaves behind.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { eventually, InstantClock } from '@workauto/retry/testing';
import pg from 'pg';
import { createPool, ensureDatabase } from './index.js';
import { MigrationError, MigrationLockTimeoutError, pendingMigrations, runMigrations } from './migrations.js';

async function freshDatabase(): Promise<string> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests through with-infra (make test)');
  return ensureDatabase(server, `t_mig_${randomBytes(4).toString('hex')}`);
}

async function migrationsDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  for (const [name, sql] of Object.entries(files)) await writeFile(join(dir, name), sql);
  return dir;
}

/** A logger that keeps its lines. */
function recorder() {
  const lines: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  return {
    lines,
    info: (fields: Record<string, unknown>, msg: string) => void lines.push({ level: 'info', fields, msg }),
    warn: (fields: Record<string, unknown>, msg: string) => void lines.push({ level: 'warn', fields, msg }),
  } as const;
}

/** A session of its own that holds the migration lock, as another replica (or an older release) would. */
async function holdLock(
  url: string,
  how: 'transaction' | 'session',
): Promise<{ pid: number; release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url, application_name: 'other-replica' });
  await client.connect();
  if (how === 'transaction') {
    await client.query('BEGIN');
    await client.query("SELECT pg_advisory_xact_lock(hashtext('workauto.migrations'))");
  } else {
    // What releases before this one did.
    await client.query("SELECT pg_advisory_lock(hashtext('workauto.migrations'))");
  }
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  return { pid, release: () => client.end() };
}

async function tableExists(pool: pg.Pool, name: string): Promise<boolean> {
  return (await pool.query<{ e: boolean }>('SELECT to_regclass($1) IS NOT NULL AS e', [name])).rows[0]!.e;
}

const MIGRATIONS_MODULE = new URL('./migrations.js', import.meta.url).href;
const POOL_MODULE = new URL('./pool.js', import.meta.url).href;

/** A process of its own that runs the migrations of dir and prints what it applied as its last line. */
function migratingProcess(url: string, dir: string, name: string) {
  const script = `
    import { runMigrations } from ${JSON.stringify(MIGRATIONS_MODULE)};
    import { createPool } from ${JSON.stringify(POOL_MODULE)};
    const pool = createPool(${JSON.stringify(url)}, { applicationName: ${JSON.stringify(name)} });
    const applied = await runMigrations(pool, [${JSON.stringify(dir)}], { waitLogEveryMs: 200 });
    await pool.end();
    console.log(JSON.stringify({ applied }));
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info' },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const done = new Promise<{ code: number | null; out: string; applied: string[] }>((resolve) =>
    child.on('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '';
      resolve({ code, out, applied: last.startsWith('{"applied"') ? JSON.parse(last).applied : [] });
    }),
  );
  return { child, done, output: () => out };
}

/** The pid of the session holding the migration lock of url's database, once one does. */
async function lockHolderPid(pool: pg.Pool, notPid = 0): Promise<number> {
  return eventually(
    'a session takes the migration lock',
    async () =>
      (
        await pool.query<{ pid: number }>(
          `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> $1
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          [notPid],
        )
      ).rows[0]?.pid,
  );
}

describe('runMigrations', () => {
  it('two processes migrating one database at once: one applies, the other logs who holds the lock, waits, and finds nothing to do', async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({
      '0001_things.sql': 'CREATE TABLE m_things (id int PRIMARY KEY);',
      // Slow until the test lets it go: after the second has logged its wait (a fixed pg_sleep let
      // the first finish before a slow machine had started the second).
      '0002_slow.sql': 'SELECT pg_advisory_xact_lock(4242); INSERT INTO m_things VALUES (1);',
    });
    const pool = createPool(url, { max: 2 });
    const gate = new pg.Client({ connectionString: url });
    await gate.connect();
    try {
      await gate.query('SELECT pg_advisory_lock(4242)');
      const gatePid = (await gate.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const first = migratingProcess(url, dir, 'migrator-a');
      const holder = await lockHolderPid(pool, gatePid);
      const second = migratingProcess(url, dir, 'migrator-b');
      await eventually('the second waits for the migration lock', () =>
        second.output().includes('waiting for the migration lock'),
      );
      await gate.end();
      const [a, b] = await Promise.all([first.done, second.done]);
      assert.equal(a.code, 0, a.out);
      assert.equal(b.code, 0, b.out);
      assert.deepEqual(a.applied, ['0001_things', '0002_slow']);
      assert.deepEqual(b.applied, [], 'the second found everything applied');
      const waits = b.out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; holder_pid?: number })
        .filter((l) => l.msg?.startsWith('waiting for the migration lock'));
      assert.ok(waits.length >= 1, `the second logged its wait:\n${b.out}`);
      assert.equal(waits[0]!.holder_pid, holder);
      assert.match(waits[0]!.msg ?? '', new RegExp(`held by pid ${holder} \\(application 'migrator-a'`));
      assert.deepEqual((await pool.query('SELECT id FROM m_things')).rows, [{ id: 1 }], 'applied once');
      assert.equal((await pool.query('SELECT count(*)::int AS n FROM schema_migrations')).rows[0].n, 2);
    } finally {
      await gate.end().catch(() => undefined);
      await pool.end();
    }
  });

  it('gives up after the lock timeout with an error naming the session that holds the lock', async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({ '0001_things.sql': 'CREATE TABLE m_things (id int);' });
    const pool = createPool(url, { max: 2 });
    const held = await holdLock(url, 'transaction');
    try {
      const log = recorder();
      // Its polls pass at once on this clock: the whole timeout is waited on it, not on the wall clock.
      const clock = new InstantClock();
      const err = await runMigrations(pool, [dir], {
        lockTimeoutMs: 900,
        waitLogEveryMs: 300,
        logger: log,
        clock,
      }).then(
        () => assert.fail('migrated although the lock was held'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof MigrationLockTimeoutError, String(err));
      assert.match(
        err.message,
        new RegExp(`still held after \\d+ s by pid ${held.pid} \\(application 'other-replica'`),
      );
      assert.match(err.message, new RegExp(`pg_terminate_backend\\(${held.pid}\\)`));
      assert.match(err.message, /MIGRATION_LOCK_TIMEOUT_MS \(900\)/);
      assert.deepEqual(clock.waits, [200, 200, 200, 200, 100], 'polled every 200 ms for the whole timeout, no longer');
      assert.deepEqual(
        log.lines.filter((l) => l.level === 'warn').map((l) => l.fields.waited_ms),
        [0, 400, 800],
        'logged the wait while it lasted, every 300 ms at most',
      );
      assert.equal(await tableExists(pool, 'm_things'), false, 'applied nothing');
    } finally {
      await held.release();
      await pool.end();
    }
  });

  it('waits for a previous release holding the lock the old (session) way, then applies', async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({ '0001_things.sql': 'CREATE TABLE m_things (id int);' });
    const pool = createPool(url, { max: 2 });
    const held = await holdLock(url, 'session');
    try {
      const log = recorder();
      const running = runMigrations(pool, [dir], { waitLogEveryMs: 200, logger: log });
      await eventually('the runner logs who holds the lock', () =>
        log.lines.some((l) => l.msg.includes(`held by pid ${held.pid}`)),
      );
      assert.equal(await tableExists(pool, 'm_things'), false, 'nothing applied while the old runner holds the lock');
      await held.release();
      assert.deepEqual(await running, ['0001_things']);
    } finally {
      await pool.end();
    }
  });

  it('holds the lock in its transaction only: on a pool of one connection, as behind a transaction pooler, nothing stays locked', async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({ '0001_things.sql': 'CREATE TABLE m_things (id int);' });
    const single = createPool(url, { max: 1 });
    try {
      assert.deepEqual(await runMigrations(single, [dir]), ['0001_things']);
      const { rows } = await single.query(
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
      );
      assert.equal(rows.length, 0, 'the connection, back in the pool, holds no advisory lock');
      // Another session gets the lock at once.
      const other = await holdLock(url, 'session');
      await other.release();
    } finally {
      await single.end();
    }
  });

  it('applies the pending files in one transaction: a failing file leaves none of them applied and names itself', async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({
      '0001_things.sql': 'CREATE TABLE m_things (id int PRIMARY KEY);',
      '0002_broken.sql': 'INSERT INTO m_things VALUES (1), (1);',
    });
    const pool = createPool(url, { max: 2 });
    try {
      const err = await runMigrations(pool, [dir]).then(
        () => assert.fail('a broken file was applied'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof MigrationError);
      assert.equal(err.code, '23505');
      assert.match(err.message, /0002_broken\.sql failed: duplicate key .* \(SQLSTATE 23505\)/);
      assert.equal(await tableExists(pool, 'm_things'), false, '0001 was rolled back with it');
      assert.deepEqual(await pendingMigrations(pool, [dir]), ['0001_things', '0002_broken']);
    } finally {
      await pool.end();
    }
  });

  it('bounds how long a migration waits for a table lock (lock_timeout), so it cannot queue every query behind it', async () => {
    const url = await freshDatabase();
    const pool = createPool(url, { max: 3 });
    await runMigrations(pool, [await migrationsDir({ '0001_things.sql': 'CREATE TABLE m_things (id int);' })]);
    // A long transaction that read the table holds a lock ALTER TABLE must wait for.
    const reader = await pool.connect();
    await reader.query('BEGIN');
    await reader.query('SELECT * FROM m_things');
    try {
      const dir = await migrationsDir({
        '0002_more.sql': 'ALTER TABLE m_things ADD COLUMN name text;',
      });
      const err = await runMigrations(pool, [dir], { statementLockTimeoutMs: 300 }).then(
        () => assert.fail('altered a table another transaction holds'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof MigrationError);
      assert.equal(err.code, '55P03');
      assert.match(err.message, /stayed locked by other sessions .* tried again at the next start/);
    } finally {
      await reader.query('ROLLBACK');
      reader.release();
    }
    await pool.end();
  });

  it('runs a no-transaction file (CREATE INDEX CONCURRENTLY) outside the transaction, in order, under the lock', async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({
      '0001_things.sql':
        'CREATE TABLE m_things (id int, name text); INSERT INTO m_things VALUES (1, $$a$$), (2, $$b$$);',
      '0002_index.sql': '-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS m_things_name ON m_things (name);',
      '0003_column.sql': 'ALTER TABLE m_things ADD COLUMN note text;',
    });
    const pool = createPool(url, { max: 2 });
    try {
      assert.deepEqual(await runMigrations(pool, [dir]), ['0001_things', '0002_index', '0003_column']);
      const { rows } = await pool.query(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = 'm_things_name'::regclass",
      );
      assert.deepEqual(rows, [{ indisvalid: true }]);
      assert.deepEqual(
        (await pool.query('SELECT version FROM schema_migrations ORDER BY applied_at, version')).rows.map(
          (r) => r.version,
        ),
        ['0001_things', '0002_index', '0003_column'],
      );
    } finally {
      await pool.end();
    }
  });

  it("does not hold the older releases' lock during an index build: an older pod starting meanwhile neither waits nor blocks it", async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({
      '0001_things.sql': 'CREATE TABLE m_things (id int, name text);',
      '0002_index.sql': '-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS m_things_name ON m_things (name);',
    });
    const pool = createPool(url, { max: 3 });
    // A transaction with an older snapshot (a report, a slow request): the index build waits for it.
    const reader = new pg.Client({ connectionString: url });
    await reader.connect();
    await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await reader.query('SELECT 1');
    try {
      const running = runMigrations(pool, [dir], { logger: recorder() });
      await eventually(
        'the index build waits for the older snapshot',
        async () =>
          (
            await pool.query(
              "SELECT 1 FROM pg_stat_activity WHERE query LIKE '%CREATE INDEX CONCURRENTLY%' AND wait_event = 'virtualxid'",
            )
          ).rows.length > 0,
      );
      // What a pod of an older release runs at start: a blocking wait for the lock, as a session.
      const old = new pg.Client({ connectionString: url, statement_timeout: 3_000 });
      await old.connect();
      try {
        await old.query("SELECT pg_advisory_lock(hashtext('workauto.migrations'))");
        await old.query("SELECT pg_advisory_unlock(hashtext('workauto.migrations'))");
      } finally {
        await old.end();
      }
      await reader.query('COMMIT');
      assert.deepEqual(await running, ['0001_things', '0002_index']);
    } finally {
      await reader.end();
      await pool.end();
    }
  });

  it('refuses to record an index build that left an INVALID index, and says how to fix it', async () => {
    const url = await freshDatabase();
    const dir = await migrationsDir({
      '0001_things.sql': 'CREATE TABLE m_things (id int); INSERT INTO m_things VALUES (1), (1);',
      '0002_unique.sql':
        '-- no-transaction\nCREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS m_things_id ON m_things (id);',
    });
    const pool = createPool(url, { max: 2 });
    try {
      const first = await runMigrations(pool, [dir]).catch((e: unknown) => e);
      assert.ok(first instanceof MigrationError);
      assert.match(
        first.message,
        /0002_unique\.sql failed: could not create unique index .*Applied and kept before it: 0001_things/,
      );
      // Run again (a restarted pod): IF NOT EXISTS skips the index the failed build left behind.
      const again = await runMigrations(pool, [dir]).catch((e: unknown) => e);
      assert.ok(again instanceof MigrationError);
      assert.match(again.message, /left invalid indexes \(m_things_id\).*DROP INDEX CONCURRENTLY/);
      assert.deepEqual(await pendingMigrations(pool, [dir]), ['0002_unique']);
    } finally {
      await pool.end();
    }
  });

  it('refuses two files of the same version in different folders (one row would record both)', async () => {
    const a = await migrationsDir({ '0001_outbox.sql': 'SELECT 1;' });
    const b = await migrationsDir({ '0001_outbox.sql': 'SELECT 2;' });
    const pool = createPool(await freshDatabase(), { max: 1 });
    try {
      await assert.rejects(runMigrations(pool, [a, b]), /two migrations are named 0001_outbox/);
    } finally {
      await pool.end();
    }
  });

  it('refuses a MIGRATION_LOCK_TIMEOUT_MS that is not a positive integer, naming it', async () => {
    const pool = createPool(await freshDatabase(), { max: 1 });
    const saved = process.env.MIGRATION_LOCK_TIMEOUT_MS;
    process.env.MIGRATION_LOCK_TIMEOUT_MS = '5s';
    try {
      await assert.rejects(
        runMigrations(pool, []),
        /MIGRATION_LOCK_TIMEOUT_MS: must be a positive integer of milliseconds; unset it for \d+ \(got "5s"\)/,
      );
    } finally {
      if (saved === undefined) delete process.env.MIGRATION_LOCK_TIMEOUT_MS;
      else process.env.MIGRATION_LOCK_TIMEOUT_MS = saved;
      await pool.end();
    }
  });
});
