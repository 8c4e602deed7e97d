import { isDatabaseUnavailable, type Pool } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { retry, systemClock, type Clock } from '@workauto/retry';
import { DependencyUnavailableError } from './dependency-error.js';

/** host:port/database of a URL, for log lines (never the credentials). */
export function describeDatabase(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    return `${url.hostname}:${url.port || 5432}${url.pathname}`;
  } catch {
    return 'the database (DATABASE_URL does not parse as a URL)';
  }
}

export interface WaitOptions {
  /** First retry delay; doubles up to maxDelayMs (defaults 250 ms and 5 s). */
  firstDelayMs?: number;
  maxDelayMs?: number;
  /** Gives up after this long with a DependencyUnavailableError naming the dependency (default: never). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** The clock it waits on (default the system's). */
  clock?: Clock;
}

/**
 * Runs step until it succeeds, retrying with backoff while isTransient(error), and logging what it
 * waits for (`what`, e.g. the database's host:port/name). Any other error is thrown at once; past
 * timeoutMs, a DependencyUnavailableError that names the dependency and the last reason.
 */
export async function untilAvailable<T>(
  what: { dependency: string; where: string; hint: string },
  logger: Logger,
  step: () => Promise<T>,
  isTransient: (err: unknown) => boolean,
  options: WaitOptions = {},
): Promise<T> {
  const clock = options.clock ?? systemClock;
  const started = clock.now().getTime();
  let retried = false as boolean; // set by onRetry, which TypeScript does not see run
  const result = await retry(step, {
    backoff: { firstMs: options.firstDelayMs ?? 250, maxMs: options.maxDelayMs ?? 5_000 },
    retryable: isTransient,
    timeoutMs: options.timeoutMs,
    timedOut: ({ error, elapsedMs }) =>
      new DependencyUnavailableError(what.dependency, what.where, elapsedMs, (error as Error).message, what.hint),
    onRetry: ({ attempt, error, delayMs }) => {
      retried = true;
      logger.warn(
        { [what.dependency]: what.where, attempt, retry_in_ms: delayMs, reason: (error as Error).message },
        `waiting for the ${what.dependency} before serving (${what.hint})`,
      );
    },
    signal: options.signal,
    clock,
  });
  if (retried)
    logger.info(
      { [what.dependency]: what.where, waited_ms: clock.now().getTime() - started },
      `${what.dependency} reachable; starting`,
    );
  return result;
}

/**
 * untilAvailable for the database: retries while it cannot be reached (isDatabaseUnavailable). A
 * service starting before its database (a cluster coming up, an outage) waits instead of exiting.
 */
export function untilDatabaseAnswers<T>(
  databaseUrl: string,
  logger: Logger,
  step: () => Promise<T>,
  options: WaitOptions = {},
): Promise<T> {
  const what = {
    dependency: 'database',
    where: describeDatabase(databaseUrl),
    hint: 'check DATABASE_URL and that the server is up',
  };
  return untilAvailable(what, logger, step, isDatabaseUnavailable, options);
}

/** How often a database that stopped answering is pinged, so readiness comes back within a second of it. */
const RECOVERY_CHECK_MS = 1_000;

/**
 * Readiness follows the database: pings it every everyMs (every second while it does not answer)
 * and calls onChange(false) when it stops answering, onChange(true) when it answers again.
 */
export function watchDatabase(pool: Pool, everyMs: number, onChange: (reachable: boolean) => void): NodeJS.Timeout {
  let reachable = true;
  let checking = false;
  let sinceCheck = 0;
  const tickMs = Math.min(everyMs, RECOVERY_CHECK_MS);
  const check = async () => {
    sinceCheck += tickMs;
    if (checking || (reachable && sinceCheck < everyMs)) return;
    checking = true;
    sinceCheck = 0;
    const ok = await pool.query('SELECT 1').then(
      () => true,
      () => false,
    );
    checking = false;
    if (ok === reachable) return;
    reachable = ok;
    onChange(ok);
  };
  // check() rejects only if onChange throws, which is the caller's bug: it surfaces as an unhandled rejection.
  const timer = setInterval(() => void check(), tickMs);
  timer.unref();
  return timer;
}
