/**
 * The migration runner through a real PgBouncer in transaction mode (what docs/decisions.md calls
 * supported): there, consecutive statements of one client may run on different server connections,
 * and a session-level advisory lock stays on whichever connection took it, shared by every client
 * that lands there next. PgBouncer comes from Debian's package (.ci/pgbouncer.sh, cached; pgbouncer-fixture.ts).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type pg from 'pg';
import { createPool, ensureDatabase } from './index.js';
import { runMigrations } from './migrations.js';
import { findPgBouncer, startPgBouncer } from './pgbouncer-fixture.js';

const bouncer = findPgBouncer();
const skip =
  'missing' in bouncer ? bouncer.missing : !process.env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL is not set' : false;

/** A PgBouncer in transaction mode with poolSize server connections per database, in front of the test server. */
function startBouncer(poolSize: number) {
  if (!('binary' in bouncer)) throw new Error('no PgBouncer on this machine');
  return startPgBouncer(bouncer.binary, process.env.TEST_DATABASE_URL!, poolSize);
}

async function migrationsDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  for (const [name, sql] of Object.entries(files)) await writeFile(join(dir, name), sql);
  return dir;
}

/** Three slow files, each appending to a log table without a key: a file applied twice shows as a duplicate row. */
const quiet = { info: () => undefined, warn: () => undefined };

const SLOW_FILES = {
  '0001_log.sql': 'CREATE TABLE m_log (file text NOT NULL);',
  '0002_a.sql': "SELECT pg_sleep(0.3); INSERT INTO m_log VALUES ('0002');",
  '0003_b.sql': "SELECT pg_sleep(0.3); INSERT INTO m_log VALUES ('0003');",
};

describe('runMigrations behind PgBouncer in transaction mode', { skip }, () => {
  let direct: pg.Pool;
  before(() => {
    direct = createPool(process.env.TEST_DATABASE_URL!, { max: 2 });
  });
  after(() => direct?.end());

  for (const poolSize of [1, 4]) {
    it(`two runners at once (${poolSize} server connection${poolSize > 1 ? 's' : ''}): each file applied once, no lock left behind`, async () => {
      const name = `t_bouncer_${randomBytes(4).toString('hex')}`;
      await ensureDatabase(process.env.TEST_DATABASE_URL!, name);
      const bouncer = await startBouncer(poolSize);
      const dir = await migrationsDir(SLOW_FILES);
      const pools = [createPool(bouncer.url(name), { max: 3 }), createPool(bouncer.url(name), { max: 3 })];
      try {
        const runs = await Promise.allSettled(
          pools.map((p) => runMigrations(p, [dir], { waitLogEveryMs: 100, logger: quiet })),
        );
        const failed = runs.filter((r) => r.status === 'rejected').map((r) => String(r.reason));
        assert.deepEqual(failed, [], 'both runners succeed');
        const applied = runs.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
        assert.deepEqual(applied.sort(), ['0001_log', '0002_a', '0003_b'], 'each file applied by one runner');
        const db = createPool(bouncer.url(name), { max: 1 });
        try {
          assert.deepEqual((await db.query('SELECT file FROM m_log ORDER BY file')).rows, [
            { file: '0002' },
            { file: '0003' },
          ]);
        } finally {
          await db.end();
        }
        // On the server itself: no server connection kept the lock (a session lock taken through
        // the pooler stays on whichever connection ran it, and blocks the next release's start).
        const { rows } = await direct.query(
          `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = $1)`,
          [name],
        );
        assert.deepEqual(rows, []);
      } finally {
        await Promise.all(pools.map((p) => p.end()));
        await bouncer.stop();
      }
    });
  }

  it('applies a no-transaction file (CREATE INDEX CONCURRENTLY) through the pooler, between transactional ones', async () => {
    const name = `t_bouncer_${randomBytes(4).toString('hex')}`;
    await ensureDatabase(process.env.TEST_DATABASE_URL!, name);
    const bouncer = await startBouncer(2);
    const pool = createPool(bouncer.url(name), { max: 2 });
    try {
      const dir = await migrationsDir({
        ...SLOW_FILES,
        '0004_index.sql': '-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS m_log_file ON m_log (file);',
        '0005_c.sql': "INSERT INTO m_log VALUES ('0005');",
      });
      assert.deepEqual(await runMigrations(pool, [dir], { logger: quiet }), [
        '0001_log',
        '0002_a',
        '0003_b',
        '0004_index',
        '0005_c',
      ]);
      assert.deepEqual(
        (await pool.query("SELECT indisvalid FROM pg_index WHERE indexrelid = 'm_log_file'::regclass")).rows,
        [{ indisvalid: true }],
      );
    } finally {
      await pool.end();
      await bouncer.stop();
    }
  });
});
