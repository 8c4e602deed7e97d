import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { createLogger } from '@workauto/logger';
import { loadConfig, vars } from '@workauto/config';
import { retry, systemClock, type Clock } from '@workauto/retry';

/**
 * Two advisory locks, both held by a transaction (never a session: see runMigrations):
 * - RUNNER_LOCK, taken by this runner for every step, so one process migrates a database at a time;
 * - SHARED_LOCK, the one releases before this one took (session-level, waiting on it), taken as
 *   well for steps that change the schema in a transaction, so an older release's pod starting
 *   meanwhile waits for them. It is not held while a `-- no-transaction` index build runs: the build
 *   waits for every transaction with an older snapshot, an older runner waiting on the lock has one,
 *   and neither would ever finish.
 */
const RUNNER_LOCK = 'workauto.migrations.runner';
const SHARED_LOCK = 'workauto.migrations';
/** How often a waiting runner tries the locks again (short transactions: it holds no snapshot between tries). */
const LOCK_POLL_MS = 200;
/** How long a start waits for another process's migrations unless MIGRATION_LOCK_TIMEOUT_MS says otherwise. */
const DEFAULT_LOCK_TIMEOUT_MS = 300_000;
/** How often the wait for the lock is logged. */
const WAIT_LOG_EVERY_MS = 5_000;
/**
 * lock_timeout of the migrations' own statements: an ALTER TABLE queued behind a long transaction
 * would otherwise block every query on that table for as long as it waits. A file may raise it
 * (SET LOCAL lock_timeout = …) for itself.
 */
const STATEMENT_LOCK_TIMEOUT_MS = 10_000;
/** First line of a file that must run outside a transaction (CREATE/DROP INDEX CONCURRENTLY). */
const NO_TRANSACTION = /^\s*--\s*no-transaction\s*$/m;

export interface MigrationFile {
  /** The file name without `.sql`: what schema_migrations records. */
  version: string;
  path: string;
  sql: string;
  /** Marked `-- no-transaction` on its first line. */
  noTransaction: boolean;
}

/** What the runner logs through (a pino logger is one). */
export interface MigrationLogger {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
}

export interface MigrationOptions {
  /** Where the wait for another process's lock is logged (default: a logger named `migrations`). */
  logger?: MigrationLogger;
  /** How long to wait for the lock before failing (default MIGRATION_LOCK_TIMEOUT_MS, else 5 minutes). */
  lockTimeoutMs?: number;
  /** How often the wait is logged (default 5 s). */
  waitLogEveryMs?: number;
  /** lock_timeout of the files' statements (default 10 s). */
  statementLockTimeoutMs?: number;
  /** The clock the wait for the lock polls on (default the system's). */
  clock?: Clock;
}

/** A migration file failed; `code` is PostgreSQL's SQLSTATE, so callers can tell an outage from a bad file. */
export class MigrationError extends Error {
  override name = 'MigrationError';
  constructor(
    message: string,
    readonly code: string | undefined,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The migration lock stayed held by another session for the whole timeout. */
export class MigrationLockTimeoutError extends Error {
  override name = 'MigrationLockTimeoutError';
  readonly code = 'MIGRATION_LOCK_TIMEOUT';
}

/**
 * The `NNNN_name.sql` files of each folder, sorted by name within a folder, folders in the order
 * given. Two files of the same version would record one row: refused.
 */
export async function listMigrations(dirs: string[]): Promise<MigrationFile[]> {
  const files: MigrationFile[] = [];
  const seen = new Map<string, string>();
  for (const dir of dirs) {
    for (const name of (await readdir(dir)).filter((n) => n.endsWith('.sql')).sort()) {
      const version = name.replace(/\.sql$/, '');
      const path = join(dir, name);
      const other = seen.get(version);
      if (other) throw new Error(`two migrations are named ${version} (${other} and ${path}): rename the newer one`);
      seen.set(version, path);
      const sql = await readFile(path, 'utf8');
      files.push({ version, path, sql, noTransaction: NO_TRANSACTION.test(sql.split('\n', 1)[0] ?? '') });
    }
  }
  return files;
}

async function appliedVersions(db: pg.Pool | pg.PoolClient): Promise<Set<string> | undefined> {
  const { rows } = await db.query<{ exists: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists");
  if (!rows[0]!.exists) return undefined;
  return new Set(
    (await db.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
  );
}

/**
 * The versions of `dirs` the database has not recorded yet (all of them before the first
 * migration). Reads only: what a process started with MIGRATE_ON_START=false waits on.
 */
export async function pendingMigrations(pool: pg.Pool, dirs: string[]): Promise<string[]> {
  const files = await listMigrations(dirs);
  const done = (await appliedVersions(pool)) ?? new Set<string>();
  return files.filter((f) => !done.has(f.version)).map((f) => f.version);
}

/**
 * Applies the pending files of `dirs` and records them in schema_migrations; returns the versions
 * it applied (none when another process applied them first).
 *
 * One transaction holds the locks (pg_advisory_xact_lock, RUNNER_LOCK and SHARED_LOCK) and applies
 * every pending file, so a failure leaves the database as it was, and the locks hold through a
 * transaction pooler (PgBouncer in transaction mode, where a session lock stays on whichever server
 * connection took it, shared by the next clients there). A runner that finds them taken retries in
 * a new transaction every 200 ms, logging who holds them, up to MIGRATION_LOCK_TIMEOUT_MS.
 *
 * A file marked `-- no-transaction` (CREATE INDEX CONCURRENTLY, which cannot run in a transaction)
 * runs on a connection of its own while a transaction that has changed nothing holds RUNNER_LOCK,
 * then is recorded; the files before it commit first. It holds one idempotent statement (IF NOT
 * EXISTS / IF EXISTS), since a crash after it but before its record runs it again.
 */
export async function runMigrations(pool: pg.Pool, dirs: string[], options: MigrationOptions = {}): Promise<string[]> {
  const lockTimeoutMs =
    options.lockTimeoutMs ??
    loadConfig({
      MIGRATION_LOCK_TIMEOUT_MS: vars.integer(DEFAULT_LOCK_TIMEOUT_MS, {
        min: 1,
        what: 'a positive integer of milliseconds',
      }),
    }).MIGRATION_LOCK_TIMEOUT_MS;
  const logger = options.logger ?? createLogger('migrations');
  const statementLockTimeoutMs = options.statementLockTimeoutMs ?? STATEMENT_LOCK_TIMEOUT_MS;
  const clock = options.clock ?? systemClock;
  const logEveryMs = options.waitLogEveryMs ?? WAIT_LOG_EVERY_MS;
  const started = clock.now().getTime();
  let logged: number | undefined;
  const files = await listMigrations(dirs);
  const applied: string[] = [];
  // Polls (no transaction stays open between tries) while another process holds a lock, logging
  // who holds it every logEveryMs, and throws MigrationLockTimeoutError past lockTimeoutMs.
  await retry(
    async () => {
      for (;;) {
        const step = await migrateStep(pool, files, applied, statementLockTimeoutMs);
        if (step === 'done') return;
        if (step !== 'more') throw new LockBusy(step.busy);
      }
    },
    {
      backoff: { firstMs: LOCK_POLL_MS, factor: 1 },
      retryable: (err) => err instanceof LockBusy,
      timeoutMs: lockTimeoutMs,
      timedOut: async ({ error, elapsedMs }) => {
        const holder = await lockHolder(pool, (error as LockBusy).lock);
        return new MigrationLockTimeoutError(
          `the migration lock was still held after ${Math.round(elapsedMs / 1000)} s by ${holder.text}: another process ` +
            `is applying migrations to this database. Start again once it is done; if it is stuck, end it with ` +
            `SELECT pg_terminate_backend(${holder.pid ?? '<pid>'}); MIGRATION_LOCK_TIMEOUT_MS (${lockTimeoutMs}) sets how long to wait`,
        );
      },
      onRetry: async ({ error, elapsedMs }) => {
        const now = clock.now().getTime();
        if (logged !== undefined && now - logged < logEveryMs) return;
        const holder = await lockHolder(pool, (error as LockBusy).lock);
        logger.warn(
          { holder_pid: holder.pid, holder: holder.text, waited_ms: elapsedMs, timeout_ms: lockTimeoutMs },
          `waiting for the migration lock held by ${holder.text} (another process is applying migrations; giving up after MIGRATION_LOCK_TIMEOUT_MS = ${lockTimeoutMs} ms)`,
        );
        logged = clock.now().getTime();
      },
      clock,
    },
  );
  if (logged !== undefined) logger.info({ waited_ms: clock.now().getTime() - started }, 'got the migration lock');
  return applied;
}

/** Another process holds this lock (RUNNER_LOCK or SHARED_LOCK): try again later. */
class LockBusy extends Error {
  constructor(readonly lock: string) {
    super(`${lock} is held by another process`);
  }
}

/**
 * One transaction of the runner: takes the locks and applies what it can (every pending file up to
 * the first `-- no-transaction` one, or that one alone). 'more' when files are left, a busy lock's
 * name when another process holds it.
 */
async function migrateStep(
  pool: pg.Pool,
  files: MigrationFile[],
  applied: string[],
  statementLockTimeoutMs: number,
): Promise<'done' | 'more' | { busy: string }> {
  const client = await pool.connect();
  let step: 'done' | 'more' | { busy: string };
  let open = true;
  try {
    await client.query('BEGIN');
    // Migrations take as long as they take; waits for table locks are bounded instead (below).
    // idle_in_transaction: this transaction idles while a no-transaction file runs elsewhere.
    await client.query('SET LOCAL statement_timeout = 0');
    await client.query('SET LOCAL idle_in_transaction_session_timeout = 0');
    if (!(await tryLock(client, RUNNER_LOCK))) step = { busy: RUNNER_LOCK };
    else {
      const recorded = await appliedVersions(client);
      const pending = files.filter((f) => !recorded?.has(f.version));
      if (pending.length === 0) step = 'done';
      else if (recorded && pending[0]!.noTransaction) {
        // This transaction wrote nothing and holds no table lock, so it does not hold back the
        // index build (which waits for older transactions that hold a snapshot or a lock on its table).
        await applyOutsideTransaction(pool, pending[0]!, applied);
        await record(client, pending[0]!.version);
        await client.query('COMMIT');
        open = false;
        applied.push(pending[0]!.version);
        step = pending.length > 1 ? 'more' : 'done';
      } else if (!(await tryLock(client, SHARED_LOCK))) step = { busy: SHARED_LOCK };
      else {
        // Created only when missing: a process without DDL rights (MIGRATE_ON_START=false) may still run this.
        if (!recorded)
          await client.query(
            'CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
          );
        const batch: string[] = [];
        for (const file of pending) {
          if (file.noTransaction) break;
          // Each file starts from the runner's lock_timeout, whatever the one before set.
          await client.query(`SET LOCAL lock_timeout = ${statementLockTimeoutMs}`);
          await client
            .query(file.sql)
            .catch((err: unknown) => Promise.reject(failure(file, err, applied, statementLockTimeoutMs)));
          await record(client, file.version);
          batch.push(file.version);
        }
        await client.query('COMMIT');
        open = false;
        applied.push(...batch);
        step = batch.length < pending.length ? 'more' : 'done';
      }
    }
    // Nothing to do, or a lock is busy: end the transaction (and its locks) before waiting.
    if (open) await client.query('ROLLBACK');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
  return step;
}

async function record(client: pg.PoolClient, version: string): Promise<void> {
  await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [version]);
}

async function tryLock(client: pg.PoolClient, name: string): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [name]);
  return rows[0]!.ok;
}

/** Who holds the migration lock of this database, as a log line can say it. */
async function lockHolder(pool: pg.Pool, name: string): Promise<{ pid: number | undefined; text: string }> {
  // A bigint advisory key is stored as classid (high 32 bits) and objid (low 32 bits), objsubid 1.
  const { rows } = await pool.query<{
    pid: number;
    application_name: string | null;
    client_addr: string | null;
    state: string | null;
    seconds: number | null;
    query: string | null;
  }>(
    `WITH k AS (SELECT hashtext($1)::bigint AS key)
     SELECT l.pid, a.application_name, host(a.client_addr) AS client_addr, a.state,
            floor(extract(epoch FROM now() - coalesce(a.xact_start, a.backend_start)))::int AS seconds,
            left(a.query, 200) AS query
       FROM pg_locks l CROSS JOIN k LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.pid <> pg_backend_pid()
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid::bigint = (k.key >> 32) & 4294967295 AND l.objid::bigint = k.key & 4294967295`,
    [name],
  );
  const h = rows[0];
  if (!h) return { pid: undefined, text: 'a session that has just released it' };
  const parts = [
    h.application_name ? `application '${h.application_name}'` : undefined,
    h.client_addr ? `client ${h.client_addr}` : undefined,
    h.state ? `${h.state} for ${h.seconds ?? '?'} s` : undefined,
    h.query ? `last query: ${h.query.replace(/\s+/g, ' ').trim()}` : undefined,
  ].filter(Boolean);
  return { pid: h.pid, text: `pid ${h.pid}${parts.length ? ` (${parts.join(', ')})` : ''}` };
}

/**
 * A `-- no-transaction` file on a connection of its own, with no statement timeout. An index build
 * cut short leaves an INVALID index that IF NOT EXISTS would then skip: refused, with the fix.
 */
async function applyOutsideTransaction(pool: pg.Pool, file: MigrationFile, applied: string[]): Promise<void> {
  const client = new pg.Client({ ...pool.options, statement_timeout: 0 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    try {
      await client.query(file.sql);
    } catch (err) {
      throw failure(file, err, applied, 0);
    }
    const { rows } = await client.query<{ index: string }>(
      `SELECT c.relname AS index FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relnamespace = current_schema()::regnamespace`,
    );
    if (rows.length) {
      const names = rows.map((r) => r.index).join(', ');
      throw new MigrationError(
        `migration ${file.path} left invalid indexes (${names}): a concurrent index build was interrupted. ` +
          `Drop them (DROP INDEX CONCURRENTLY <name>) and migrate again`,
        undefined,
      );
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The error of a failed file: which file, what PostgreSQL said, what was kept and what to do. */
function failure(file: MigrationFile, err: unknown, applied: string[], lockTimeoutMs: number): MigrationError {
  const e = err as { message?: string; code?: string };
  const kept = applied.length ? ` Applied and kept before it: ${applied.join(', ')}.` : '';
  const hint =
    e.code === '55P03'
      ? ` A table it changes stayed locked by other sessions for longer than its lock_timeout (${lockTimeoutMs} ms) ` +
        `(long queries, idle-in-transaction sessions): it was rolled back and is tried again at the next start ` +
        `(or run the migrate command again once they are gone).`
      : file.noTransaction
        ? ' Fix the file (or the data it trips on) and migrate again.'
        : ' It was rolled back with the files applied in the same transaction: fix it (or the data it trips on) and migrate again.';
  return new MigrationError(
    `migration ${file.path} failed: ${e.message ?? String(err)}${e.code ? ` (SQLSTATE ${e.code})` : ''}.${hint}${kept}`,
    e.code,
    { cause: err },
  );
}
