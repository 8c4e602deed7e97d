#!/usr/bin/env node
/**
 * Every migration checked for what breaks a rolling upgrade, where the previous release's pods
 * still serve on the migrated database (docs/operations.md, Upgrades). Fails on any finding:
 *   - squawk (.squawk.toml) over every file; findings in files the previous release already had
 *     are listed but do not fail (every install has applied them: changing them changes nothing);
 *   - released files are never removed, renamed or changed (comments aside);
 *   - the contract rule: a DROP or RENAME of a table, column, view, type or function in a new file
 *     needs a `-- contract: <table>.<column>` (or `<name>`) line, and the previous release's code
 *     must not use that name (git grep at .ci/previous-release);
 *   - a file with CONCURRENTLY starts with `-- no-transaction` and holds that one statement,
 *     idempotent (IF NOT EXISTS / IF EXISTS), since the runner may run it again after a crash;
 *   - names are NNNN_words.sql, one number per folder.
 * Usage: node .ci/migrations-check.mjs (make migrations-check). The rules are tested by
 * .ci/migrations-check.test.mjs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadModule, parseSync } from 'libpg-query';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const NO_TRANSACTION = /^\s*--\s*no-transaction\s*$/;
const CONTRACT = /^\s*--\s*contract:\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)/gm;
const NAME = /^\d{4}_[a-z0-9_]+\.sql$/;

/** The commit of the previous release: the first line of .ci/previous-release that is not a comment. */
export function previousRelease(root = ROOT) {
  const ref = readFileSync(join(root, '.ci/previous-release'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l && !l.startsWith('#'));
  if (!ref) throw new Error('.ci/previous-release names no commit: put the commit of the previous release in it');
  const found = spawnSync('git', ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], {
    cwd: root,
    encoding: 'utf8',
  });
  if (found.status !== 0)
    throw new Error(
      `the previous release ${ref} (.ci/previous-release) is not in this clone: fetch it (git fetch --unshallow, or git fetch origin ${ref})`,
    );
  return found.stdout.trim();
}

/** Where a name occurs in the previous release's code (TypeScript outside tests and migrations). */
function grepPreviousRelease(sha, name) {
  const out = spawnSync(
    'git',
    [
      'grep',
      '-n',
      '-w',
      '-I',
      '-e',
      name,
      sha,
      '--',
      'libs/*.ts',
      'services/*.ts',
      ':(exclude)*.test.ts',
      ':(exclude)*/testing/*',
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  if (out.status > 1) throw new Error(`git grep failed: ${out.stderr}`);
  return out.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) =>
      l
        .slice(sha.length + 1)
        .replace(/\s+/g, ' ')
        .slice(0, 160),
    );
}

/** The statements of a file with their first line, parsed by PostgreSQL's own parser (libpg-query). */
function statements(sql) {
  const lineOf = (offset) => sql.slice(0, offset).split('\n').length;
  return (parseSync(sql).stmts ?? []).map((s) => {
    const start = s.stmt_location ?? 0;
    // stmt_location points at the comment lines before a statement too: report the statement's own line.
    const text = sql.slice(start, start + (s.stmt_len || sql.length));
    const lead = text.length - text.replace(/^(\s|--[^\n]*\n)*/, '').length;
    return { node: s.stmt, line: lineOf(start + lead) };
  });
}

/** Comments and layout removed: what PostgreSQL runs. */
function normalized(sql) {
  return sql
    .replace(/--[^\n]*/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** What a statement drops or renames: the names the previous release's code must not use. */
function contracted(node) {
  const out = [];
  const [kind, body] = Object.entries(node)[0];
  if (kind === 'AlterTableStmt') {
    for (const c of body.cmds ?? []) {
      const cmd = c.AlterTableCmd;
      if (cmd?.subtype === 'AT_DropColumn')
        out.push({ what: 'drops column', name: cmd.name, table: body.relation?.relname });
    }
  } else if (kind === 'DropStmt') {
    const kinds = [
      'OBJECT_TABLE',
      'OBJECT_VIEW',
      'OBJECT_MATVIEW',
      'OBJECT_TYPE',
      'OBJECT_FUNCTION',
      'OBJECT_PROCEDURE',
      'OBJECT_SEQUENCE',
    ];
    if (kinds.includes(body.removeType)) {
      for (const o of body.objects ?? []) {
        const parts = (o.List?.items ?? o.ObjectWithArgs?.objname ?? o.TypeName?.names ?? []).map(
          (i) => i.String?.sval,
        );
        const name = parts.filter(Boolean).at(-1);
        if (name) out.push({ what: `drops ${body.removeType.slice(7).toLowerCase()}`, name });
      }
    }
  } else if (kind === 'RenameStmt') {
    const name = body.renameType === 'OBJECT_COLUMN' ? body.subname : (body.relation?.relname ?? body.subname);
    if (name)
      out.push({ what: `renames ${body.renameType.slice(7).toLowerCase()}`, name, table: body.relation?.relname });
  }
  return out;
}

function concurrently(node) {
  const [kind, body] = Object.entries(node)[0];
  return (
    (kind === 'IndexStmt' || kind === 'DropStmt' || kind === 'ReindexStmt') &&
    Boolean(body.concurrent || body.params?.some?.((p) => p.DefElem?.defname === 'concurrently'))
  );
}

function idempotent(node) {
  const [kind, body] = Object.entries(node)[0];
  return (kind === 'IndexStmt' && body.if_not_exists) || (kind === 'DropStmt' && body.missing_ok);
}

/**
 * The problems of a set of migration files ({path: sql}) against the previous release's files
 * ({path: sql}); usedByPrevious(name) lists where the previous release's code uses a name.
 * Returns { problems: [{file, line, message}], notes: [...] } without squawk (see squawkProblems).
 */
export async function checkMigrations(files, released, usedByPrevious) {
  await loadModule();
  const problems = [];
  const problem = (file, line, message) => problems.push({ file, line, message });
  for (const [path, sql] of Object.entries(released)) {
    if (!(path in files))
      problem(
        path,
        1,
        'was in the previous release and is gone: a released migration is never removed or renamed (installs have recorded it; a renamed file would run again)',
      );
    else if (normalized(files[path]) !== normalized(sql))
      problem(
        path,
        1,
        'changed since the previous release, which installs have applied already: the change would reach new installs only. Put it in a new migration',
      );
  }
  const numbers = new Map();
  for (const [path, sql] of Object.entries(files)) {
    const name = path.split('/').at(-1);
    if (!NAME.test(name)) problem(path, 1, 'migration files are named NNNN_words.sql (four digits, lowercase words)');
    const key = `${dirname(path)}/${name.slice(0, 4)}`;
    if (numbers.has(key))
      problem(path, 1, `shares its number with ${numbers.get(key)}: give each migration of a folder its own number`);
    numbers.set(key, path);
    if (path in released) continue;
    let parsed;
    try {
      parsed = statements(sql);
    } catch (err) {
      problem(path, 1, `PostgreSQL's parser refuses it: ${err.message}`);
      continue;
    }
    const noTransaction = NO_TRANSACTION.test(sql.split('\n', 1)[0]);
    const concurrent = parsed.filter((s) => concurrently(s.node));
    if (concurrent.length && !noTransaction)
      problem(
        path,
        concurrent[0].line,
        'CONCURRENTLY cannot run in the transaction the runner applies files in: put it alone in a file whose first line is `-- no-transaction`',
      );
    if (noTransaction) {
      if (parsed.length !== 1 || !concurrent.length)
        problem(
          path,
          1,
          'a `-- no-transaction` file holds exactly one CREATE INDEX CONCURRENTLY or DROP INDEX CONCURRENTLY statement',
        );
      else if (!idempotent(parsed[0].node))
        problem(
          path,
          parsed[0].line,
          'a `-- no-transaction` file may run again after a crash: write IF NOT EXISTS (CREATE) or IF EXISTS (DROP)',
        );
    }
    const markers = new Set([...sql.matchAll(CONTRACT)].map((m) => m[1]));
    for (const s of parsed) {
      for (const c of contracted(s.node)) {
        const qualified = c.table ? `${c.table}.${c.name}` : c.name;
        if (!markers.has(qualified) && !markers.has(c.name)) {
          problem(
            path,
            s.line,
            `${c.what} ${qualified}: the previous release's pods still run during the upgrade. Stop using it in one release, ` +
              `drop it in the next, with a line \`-- contract: ${qualified}\` (docs/operations.md, Upgrades)`,
          );
          continue;
        }
        const uses = usedByPrevious(c.name);
        if (uses.length)
          problem(
            path,
            s.line,
            `${c.what} ${qualified}, which the previous release still uses (its pods would fail until replaced): ` +
              `${uses.slice(0, 3).join('; ')}${uses.length > 3 ? ` (+${uses.length - 3} more)` : ''}. ` +
              'Keep it for this release and drop it in the next one',
          );
      }
    }
  }
  return problems;
}

/**
 * squawk's findings (.squawk.toml) over paths (relative to the repository, or absolute) as problems,
 * and as notes for the files the previous release had (released: {path: sql}).
 */
export function squawkProblems(paths, released, root = ROOT) {
  const run = (list, extra) => {
    if (!list.length) return [];
    const out = spawnSync(
      join(root, 'node_modules/.bin/squawk'),
      ['--reporter', 'json', '--config', join(root, '.squawk.toml'), ...extra, ...list],
      {
        cwd: root,
        encoding: 'utf8',
      },
    );
    if (out.error || (out.status !== 0 && out.status !== 1) || !out.stdout.trim().startsWith('['))
      throw new Error(`squawk did not run (${out.error?.message ?? `exit ${out.status}`}): ${out.stderr}${out.stdout}`);
    return JSON.parse(out.stdout);
  };
  const noTx = paths.filter((p) => NO_TRANSACTION.test(readFileSync(resolve(root, p), 'utf8').split('\n', 1)[0]));
  const findings = [
    ...run(
      paths.filter((p) => !noTx.includes(p)),
      [],
    ),
    ...run(noTx, ['--no-assume-in-transaction']),
  ];
  const problems = [];
  const notes = [];
  for (const f of findings) {
    const entry = {
      file: f.file,
      line: f.line + 1,
      message: `squawk ${f.rule_name}: ${f.message}${f.help ? ` ${f.help}` : ''}`,
    };
    (f.file in released ? notes : problems).push(entry);
  }
  return { problems, notes };
}

function migrationPaths(root) {
  const paths = [];
  for (const top of ['libs', 'services'])
    for (const pkg of readdirSync(join(root, top)))
      try {
        for (const f of readdirSync(join(root, top, pkg, 'migrations')))
          if (f.endsWith('.sql')) paths.push(`${top}/${pkg}/migrations/${f}`);
      } catch {
        /* no migrations folder */
      }
  return paths.sort();
}

async function main() {
  const sha = previousRelease();
  const paths = migrationPaths(ROOT);
  const files = Object.fromEntries(paths.map((p) => [p, readFileSync(join(ROOT, p), 'utf8')]));
  const listed = execFileSync('git', ['ls-tree', '-r', '--name-only', sha, '--', 'libs', 'services'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\n')
    .filter((p) => /^(libs|services)\/[^/]+\/migrations\/[^/]+\.sql$/.test(p));
  const released = Object.fromEntries(
    listed.map((p) => [p, execFileSync('git', ['show', `${sha}:${p}`], { cwd: ROOT, encoding: 'utf8' })]),
  );
  const problems = await checkMigrations(files, released, (name) => grepPreviousRelease(sha, name));
  const squawk = squawkProblems(paths, released);
  problems.push(...squawk.problems);
  const short = sha.slice(0, 12);
  if (squawk.notes.length)
    console.log(
      `migrations-check: ${squawk.notes.length} squawk findings in files the previous release (${short}) already had; every install applied them, so they do not fail:`,
    );
  for (const n of squawk.notes) console.log(`  ${n.file}:${n.line}: ${n.message.split('. ')[0]}`);
  for (const p of problems) console.error(`${relative(ROOT, join(ROOT, p.file))}:${p.line}: ${p.message}`);
  if (problems.length) {
    console.error(
      `migrations-check: ${problems.length} problems in ${paths.length} migrations (previous release ${short}); see docs/operations.md, Upgrades`,
    );
    process.exit(1);
  }
  console.log(
    `migrations-check: ${paths.length} migrations safe for an upgrade from ${short} (${Object.keys(released).length} of them released)`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(`migrations-check: ${err.message}`);
    process.exit(1);
  });
}
