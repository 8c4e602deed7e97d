/**
 * A process's migrations as an operator meets them, with runProcess in a real process against a
 * real database: the `migrate` command (what the chart's Job runs) and MIGRATE_ON_START=false.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createPool } from '@workauto/db';
import { eventually, testDatabase } from '@workauto/testing';

const MAIN = new URL('./main.js', import.meta.url).href;
const CONFIG = import.meta.resolve('@workauto/config');

/** A process whose main declares `dirs` as its migrations; its start prints STARTED (the sentinel) and waits. */
async function fixture(dirs: string[]): Promise<string> {
  const file = join(await mkdtemp(join(tmpdir(), 'migrate-fixture-')), 'main.mjs');
  await writeFile(
    file,
    `import { runProcess } from ${JSON.stringify(MAIN)};
     import { vars } from ${JSON.stringify(CONFIG)};
     await runProcess({
       name: 'fixture',
       env: { DATABASE_URL: vars.url() },
       migrations: ${JSON.stringify(dirs)},
       start: async (_env, logger) => { logger.info('STARTED'); setInterval(() => {}, 1_000); return { stop: async () => {} }; },
     });`,
  );
  return file;
}

function run(file: string, args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [file, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const lines = () =>
    out
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: string; msg: string; [k: string]: unknown });
  return { child, exited, lines, stderr: () => err };
}

async function migrationsDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  for (const [name, sql] of Object.entries(files)) await writeFile(join(dir, name), sql);
  return dir;
}

describe('main.js migrate', () => {
  it('applies the migrations and exits 0; a second run finds nothing to apply', async () => {
    const url = await testDatabase('migrate_cmd');
    const main = await fixture([
      await migrationsDir({ '0000_shared.sql': 'CREATE TABLE shared (id int);' }),
      await migrationsDir({ '0001_own.sql': 'CREATE TABLE own (id int);' }),
    ]);
    const first = run(main, ['migrate'], { DATABASE_URL: url });
    assert.equal(await first.exited, 0, first.stderr());
    const done = first.lines().at(-1)!;
    assert.equal(done.msg, 'applied 2 migrations');
    assert.deepEqual(done.applied, ['0000_shared', '0001_own']);
    assert.ok(!first.lines().some((l) => l.msg === 'STARTED'), 'migrate does not start the process');

    const again = run(main, ['migrate'], { DATABASE_URL: url });
    assert.equal(await again.exited, 0);
    assert.equal(again.lines().at(-1)!.msg, 'no migrations to apply: the database has every one');
    const pool = createPool(url, { max: 1 });
    try {
      assert.equal((await pool.query('SELECT count(*)::int AS n FROM schema_migrations')).rows[0].n, 2);
    } finally {
      await pool.end();
    }
  });

  it('exits 1 with one fatal line naming the file that failed, and applies none of the batch', async () => {
    const url = await testDatabase('migrate_bad');
    const dir = await migrationsDir({
      '0001_ok.sql': 'CREATE TABLE ok (id int);',
      '0002_broken.sql': 'ALTER TABLE missing ADD COLUMN x int;',
    });
    const p = run(await fixture([dir]), ['migrate'], { DATABASE_URL: url });
    assert.equal(await p.exited, 1);
    const lines = p.lines();
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0]!.level, 'fatal');
    assert.match(
      lines[0]!.msg,
      /^migrate failed: migration .*0002_broken\.sql failed: relation "missing" does not exist/,
    );
    assert.equal(p.stderr(), '');
    const pool = createPool(url, { max: 1 });
    try {
      assert.equal((await pool.query("SELECT to_regclass('ok') AS t")).rows[0].t, null, '0001 rolled back with 0002');
    } finally {
      await pool.end();
    }
  });

  it('needs only DATABASE_URL, and names it when it is missing', async () => {
    const p = run(await fixture([await migrationsDir({})]), ['migrate'], {});
    assert.equal(await p.exited, 1);
    const lines = p.lines();
    assert.equal(lines.length, 1);
    assert.match(lines[0]!.msg, /DATABASE_URL/);
  });

  it('refuses an unknown command with one line saying what it takes', async () => {
    const p = run(await fixture([]), ['migrat'], {});
    assert.equal(await p.exited, 2);
    assert.match(p.lines()[0]!.msg, /unknown command "migrat": run with `migrate` or without arguments/);
  });
});

describe('MIGRATE_ON_START=false', () => {
  it('does not migrate: it waits, saying for what, and starts once the migrate command applied them', async () => {
    const url = await testDatabase('migrate_wait');
    const main = await fixture([await migrationsDir({ '0001_own.sql': 'CREATE TABLE own (id int);' })]);
    const server = run(main, [], { DATABASE_URL: url, MIGRATE_ON_START: 'false' });
    try {
      await eventually('it says it waits for migrations', () => {
        assert.equal(server.child.exitCode, null, server.stderr());
        return server.lines().some((l) => l.msg.startsWith('waiting for migrations'));
      });
      const waiting = server.lines().find((l) => l.msg.startsWith('waiting for migrations'))!;
      assert.equal(waiting.level, 'warn');
      assert.match(waiting.msg, /0001_own .*run the migrate Job \(node .*main\.mjs migrate\)/);
      assert.ok(!server.lines().some((l) => l.msg === 'STARTED'), 'it waits instead of starting');
      const pool = createPool(url, { max: 1 });
      try {
        const table = await pool.query("SELECT to_regclass('own') AS t");
        assert.equal(table.rows[0].t, null, 'it applied nothing itself');
      } finally {
        await pool.end();
      }

      const migrate = run(main, ['migrate'], { DATABASE_URL: url });
      assert.equal(await migrate.exited, 0);
      await eventually('it starts once the migrations are applied', () => {
        assert.equal(server.child.exitCode, null, server.stderr());
        return server.lines().some((l) => l.msg === 'STARTED');
      });
      assert.ok(server.lines().some((l) => l.msg === 'every migration is applied; starting'));
    } finally {
      server.child.kill('SIGKILL');
    }
  });

  it('exits 1 after MIGRATION_WAIT_TIMEOUT_MS with one fatal line that says to run the migrate Job', async () => {
    const url = await testDatabase('migrate_timeout');
    const main = await fixture([await migrationsDir({ '0001_own.sql': 'CREATE TABLE own (id int);' })]);
    const p = run(main, [], { DATABASE_URL: url, MIGRATE_ON_START: 'false', MIGRATION_WAIT_TIMEOUT_MS: '1500' });
    assert.equal(await p.exited, 1);
    const fatal = p.lines().filter((l) => l.level === 'fatal');
    assert.equal(fatal.length, 1);
    assert.match(
      fatal[0]!.msg,
      /still lacks migrations 0001_own after \d+ s and MIGRATE_ON_START=false.*run the migrate Job \(node .*main\.mjs migrate\), or set MIGRATE_ON_START=true/,
    );
    assert.ok(!p.lines().some((l) => l.msg === 'STARTED'));
  });

  it('refuses a value other than true or false, naming the variable', async () => {
    const p = run(await fixture([]), [], { DATABASE_URL: 'postgres://db/x', MIGRATE_ON_START: 'no' });
    assert.equal(await p.exited, 1);
    assert.match(p.lines()[0]!.msg, /MIGRATE_ON_START: must be true or false/);
  });
});
