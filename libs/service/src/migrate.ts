/**
 * The two ways a process meets its migrations besides applying them at start: the `migrate`
 * command (a Kubernetes Job before the rollout) and, with MIGRATE_ON_START=false, waiting until
 * that Job has applied them. Loaded by main.ts only when needed (it imports pg).
 */
import { createPool, pendingMigrations, runMigrations } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { retry, systemClock, type Clock } from '@workauto/retry';
import { describeDatabase, untilDatabaseAnswers } from './database.js';

/** How long the migrate command waits for an unreachable database before failing. */
const MIGRATE_DATABASE_WAIT_MS = 120_000;

/**
 * Applies the migrations of dirs and resolves to the process's exit code: 0 once the database has
 * every one, 1 after one fatal line naming the problem.
 */
export async function migrate(opts: {
  name: string;
  databaseUrl: string;
  dirs: string[];
  logger: Logger;
}): Promise<number> {
  const { logger } = opts;
  const pool = createPool(opts.databaseUrl, { max: 2, applicationName: `${opts.name}:migrate` });
  try {
    const applied = await untilDatabaseAnswers(
      opts.databaseUrl,
      logger,
      () => runMigrations(pool, opts.dirs, { logger }),
      { timeoutMs: MIGRATE_DATABASE_WAIT_MS },
    );
    logger.info(
      { applied, database: describeDatabase(opts.databaseUrl) },
      applied.length ? `applied ${applied.length} migrations` : 'no migrations to apply: the database has every one',
    );
    return 0;
  } catch (err) {
    logger.fatal(
      { err, database: describeDatabase(opts.databaseUrl) },
      `migrate failed: ${err instanceof Error ? err.message : String(err)}`,
    );
    return 1;
  } finally {
    await pool.end().catch(() => undefined);
  }
}

/** The database lacked some of the process's migrations for the whole wait. */
class MigrationsMissingError extends Error {
  override name = 'MigrationsMissingError';
}

/** One look found these migrations missing: look again. */
class StillMissing extends Error {
  constructor(readonly missing: string[]) {
    super(`migrations ${missing.join(', ')} are not applied`);
  }
}

/**
 * MIGRATE_ON_START=false: resolves once the database has recorded every migration of dirs (a
 * newer release's extra ones do not matter), logging what it waits for; throws
 * MigrationsMissingError after timeoutMs. Reads only, so the process needs no DDL rights.
 */
export async function waitUntilMigrated(opts: {
  name: string;
  databaseUrl: string;
  dirs: string[];
  logger: Logger;
  timeoutMs: number;
  /** How the operator runs the migrations, for the log lines. */
  command: string;
  pollMs?: number;
  logEveryMs?: number;
  /** The clock it waits on (default the system's). */
  clock?: Clock;
}): Promise<void> {
  const { logger } = opts;
  const clock = opts.clock ?? systemClock;
  const where = describeDatabase(opts.databaseUrl);
  const pool = createPool(opts.databaseUrl, { max: 1, applicationName: `${opts.name}:wait-for-migrations` });
  const started = clock.now().getTime();
  let logged: number | undefined;
  let lastMissing = '';
  try {
    await retry(
      async () => {
        const left = Math.max(1, opts.timeoutMs - (clock.now().getTime() - started));
        const missing = await untilDatabaseAnswers(opts.databaseUrl, logger, () => pendingMigrations(pool, opts.dirs), {
          timeoutMs: left,
          clock,
        });
        if (missing.length) throw new StillMissing(missing);
      },
      {
        backoff: { firstMs: opts.pollMs ?? 1_000, factor: 1 },
        retryable: (err) => err instanceof StillMissing,
        timeoutMs: opts.timeoutMs,
        timedOut: ({ error, elapsedMs }) =>
          new MigrationsMissingError(
            `${where} still lacks migrations ${(error as StillMissing).missing.join(', ')} after ${Math.round(elapsedMs / 1000)} s and ` +
              `MIGRATE_ON_START=false, so this process does not apply them: run the migrate Job (${opts.command}), ` +
              `or set MIGRATE_ON_START=true; MIGRATION_WAIT_TIMEOUT_MS (${opts.timeoutMs}) sets how long a start waits`,
          ),
        onRetry: ({ error, elapsedMs }) => {
          const { missing } = error as StillMissing;
          const key = missing.join(',');
          const now = clock.now().getTime();
          if (key === lastMissing && logged !== undefined && now - logged < (opts.logEveryMs ?? 5_000)) return;
          logger.warn(
            { database: where, missing, waited_ms: elapsedMs },
            `waiting for migrations ${missing.join(', ')} before serving (MIGRATE_ON_START=false): run the migrate Job (${opts.command})`,
          );
          logged = now;
          lastMissing = key;
        },
        clock,
      },
    );
    if (logged !== undefined)
      logger.info({ waited_ms: clock.now().getTime() - started }, 'every migration is applied; starting');
  } finally {
    await pool.end().catch(() => undefined);
  }
}
