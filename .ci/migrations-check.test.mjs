/**
 * The rules of .ci/migrations-check.mjs on small migrations, each one that must be refused and one
 * that must pass, so a rule that stops catching anything fails here (run by .ci/migrations-check.sh).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { checkMigrations, squawkProblems } from './migrations-check.mjs';

const DIR = 'services/svc/migrations';
/** The previous release's code uses only `legacy_flag`. */
const usedByPrevious = (name) =>
  name === 'legacy_flag' ? ['services/svc/src/repo.ts:12: SET legacy_flag = true'] : [];

async function check(files, released = {}) {
  const problems = await checkMigrations(
    Object.fromEntries(Object.entries(files).map(([n, sql]) => [`${DIR}/${n}`, sql])),
    Object.fromEntries(Object.entries(released).map(([n, sql]) => [`${DIR}/${n}`, sql])),
    usedByPrevious,
  );
  return problems.map((p) => `${p.file.split('/').at(-1)}:${p.line}: ${p.message}`);
}

describe('migrations-check: the contract rule (drop or rename only what the previous release no longer uses)', () => {
  it('refuses a DROP COLUMN without a contract line, naming the line to write', async () => {
    const [p, ...rest] = await check({ '0002_drop.sql': '-- why\n\nALTER TABLE things DROP COLUMN old_note;' });
    assert.deepEqual(rest, []);
    assert.match(p, /^0002_drop\.sql:3: drops column things\.old_note: .*`-- contract: things\.old_note`/);
  });

  it('refuses a marked drop of a column the previous release still uses, quoting where', async () => {
    const [p] = await check({
      '0002_drop.sql': '-- contract: things.legacy_flag\nALTER TABLE things DROP COLUMN IF EXISTS legacy_flag;',
    });
    assert.match(
      p,
      /drops column things\.legacy_flag, which the previous release still uses .*repo\.ts:12: SET legacy_flag = true/,
    );
  });

  it('passes a marked drop of what the previous release no longer uses (columns, tables, renames)', async () => {
    assert.deepEqual(
      await check({
        '0002_drop.sql': '-- contract: things.old_note\nALTER TABLE things DROP COLUMN old_note;',
        '0003_table.sql': '-- contract: old_things\nDROP TABLE IF EXISTS old_things;',
        '0004_rename.sql': '-- contract: things.unused\nALTER TABLE things RENAME COLUMN unused TO spare;',
      }),
      [],
    );
  });

  it('refuses an unmarked DROP TABLE and RENAME (table and column)', async () => {
    const problems = await check({
      '0002_x.sql':
        'DROP TABLE old_things; ALTER TABLE things RENAME TO stuff; ALTER TABLE stuff RENAME COLUMN a TO b;',
    });
    assert.equal(problems.length, 3, problems.join('\n'));
    assert.match(problems[0], /drops table old_things/);
    assert.match(problems[1], /renames table things/);
    assert.match(problems[2], /renames column stuff\.a/);
  });
});

describe('migrations-check: released files, names, no-transaction files', () => {
  it('refuses a released file that was removed or changed, and allows a comment-only change', async () => {
    const released = { '0001_a.sql': 'CREATE TABLE a (id int);', '0002_b.sql': 'CREATE TABLE b (id int);' };
    const problems = await check({ '0001_a.sql': 'CREATE TABLE a (id bigint);' }, released);
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.match(
      problems.find((p) => p.startsWith('0001')),
      /changed since the previous release/,
    );
    assert.match(
      problems.find((p) => p.startsWith('0002')),
      /was in the previous release and is gone/,
    );
    assert.deepEqual(
      await check(
        { '0001_a.sql': '-- explained\nCREATE TABLE a  (id int);', '0002_b.sql': released['0002_b.sql'] },
        released,
      ),
      [],
    );
  });

  it('refuses a bad name and two files of one number', async () => {
    const problems = await check({ '2_x.sql': 'SELECT 1;', '0003_a.sql': 'SELECT 1;', '0003_b.sql': 'SELECT 1;' });
    assert.ok(problems.some((p) => /^2_x\.sql:1: migration files are named NNNN_words\.sql/.test(p)));
    assert.ok(problems.some((p) => /^0003_b\.sql:1: shares its number with .*0003_a\.sql/.test(p)));
  });

  it('refuses CONCURRENTLY in a transactional file, and a no-transaction file that is not one idempotent statement', async () => {
    const problems = await check({
      '0002_tx.sql': 'CREATE INDEX CONCURRENTLY IF NOT EXISTS i ON t (x);',
      '0003_two.sql': '-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS i ON t (x);\nSELECT 1;',
      '0004_bare.sql': '-- no-transaction\nCREATE INDEX CONCURRENTLY i ON t (x);',
    });
    assert.equal(problems.length, 3, problems.join('\n'));
    assert.match(problems[0], /^0002_tx\.sql:1: CONCURRENTLY cannot run in the transaction .*`-- no-transaction`/);
    assert.match(problems[1], /^0003_two\.sql:1: a `-- no-transaction` file holds exactly one/);
    assert.match(problems[2], /^0004_bare\.sql:2: .*IF NOT EXISTS/);
    assert.deepEqual(
      await check({
        '0002_index.sql': '-- no-transaction\n-- why\nCREATE INDEX CONCURRENTLY IF NOT EXISTS i ON t (x);',
        '0003_drop.sql': '-- no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS i;',
        '0004_emptied.sql': '-- Emptied: what it did moved to a later release.\n',
      }),
      [],
    );
  });

  it("reports what PostgreSQL's parser refuses", async () => {
    const [p] = await check({ '0002_typo.sql': 'ALTER TABEL things ADD COLUMN x int;' });
    assert.match(p, /^0002_typo\.sql:1: PostgreSQL's parser refuses it: syntax error/);
  });
});

describe('migrations-check: squawk (.squawk.toml)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'squawk-'));
  const file = (name, sql) => {
    const path = join(dir, name);
    writeFileSync(path, sql);
    return path;
  };

  it('fails a blocking index build and a required column on an existing table, but not in a released file', () => {
    const index = file('0002_index.sql', 'CREATE INDEX things_x ON things (x);');
    const required = file('0003_required.sql', 'ALTER TABLE things ADD COLUMN owner uuid NOT NULL;');
    const { problems, notes } = squawkProblems([index, required], { [required]: '' });
    assert.deepEqual(
      problems.map((p) => `${p.file === index ? 'index' : 'required'} ${p.message.split(':')[0]}`),
      ['index squawk require-concurrent-index-creation'],
    );
    assert.deepEqual(
      notes.map((p) => p.message.split(':')[0]),
      ['squawk adding-required-field'],
    );
  });

  it('passes a no-transaction index build, and leaves drops and timeouts to the rules that own them', () => {
    const { problems } = squawkProblems(
      [
        file('0004_index.sql', '-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS things_y ON things (y);'),
        file('0005_drop.sql', '-- contract: things.z\nALTER TABLE things DROP COLUMN z;'),
      ],
      {},
    );
    assert.deepEqual(problems, []);
  });
});
