/**
 * The one way to wait and try again (docs/decisions.md, Retries): a clock that tests replace, a
 * backoff schedule, and `retry`, which runs an attempt until it succeeds, its failure is not
 * retryable, its attempts or its time are used up, or its signal aborts.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** The time a loop reads and waits on: the system's, or one a test moves (ManualClock, @workauto/testing). */
export interface Clock {
  now(): Date;
  /** Resolves once `ms` have passed on this clock, or as soon as `signal` aborts; never rejects. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => new Date(),
  sleep: (ms, signal) => sleep(ms, undefined, { signal }).catch(() => undefined),
};

/**
 * The system's monotonic time (performance.now, as a Date) with its waits: for leases, which a wall
 * clock set back would stretch. A wait may end a little early on it (timers run on the event loop's
 * time of its last turn): a lease waits until `now()` says it is over.
 */
export const monotonicClock: Clock = {
  now: () => new Date(performance.timeOrigin + performance.now()),
  sleep: systemClock.sleep,
};

/** The system's clock, whose waits do not keep the process alive: for retries in the background. */
export const backgroundClock: Clock = {
  now: () => new Date(),
  sleep: (ms, signal) => sleep(ms, undefined, { signal, ref: false }).catch(() => undefined),
};

/** How long to wait before each retry. */
export interface Backoff {
  /** Before the first retry, in ms. */
  firstMs: number;
  /** Each wait is this many times the one before (default 2; 1 is a fixed interval). */
  factor?: number;
  /** No wait is longer (default: none). */
  maxMs?: number;
  /**
   * So callers that failed together (two colliding transactions, jobs of one broken endpoint) do
   * not try again in step. `full`: each wait is a random part of its value ("full jitter"); a
   * number: each wait is within that fraction of its value either way (0.2: ±20 %, so the schedule
   * keeps its shape). Default none.
   */
  jitter?: 'full' | 'none' | number;
}

/** The wait before retry number `retry` (1: the first), in ms. */
export function backoffDelay(backoff: Backoff, retry: number, random: () => number = Math.random): number {
  const base = Math.min(backoff.firstMs * (backoff.factor ?? 2) ** (retry - 1), backoff.maxMs ?? Infinity);
  const { jitter = 'none' } = backoff;
  if (jitter === 'none') return base;
  return jitter === 'full' ? random() * base : base * (1 - jitter + 2 * jitter * random());
}

/** A failed attempt, as `onRetry` and `timedOut` see it. */
export interface Failure {
  /** 1 for the first attempt. */
  attempt: number;
  error: unknown;
  /** Since the first attempt started, on the clock. */
  elapsedMs: number;
}

export interface RetryOptions {
  backoff: Backoff;
  /** Whether a failure may be tried again (default: every one); any other is thrown at once. */
  retryable?: (error: unknown) => boolean;
  /** Attempts in all, the first included (default: no limit); the last failure is then thrown. */
  attempts?: number;
  /**
   * Gives up once this long has passed since the first attempt: the last wait is cut to end then,
   * and a failure after it throws `timedOut`'s error (default: the failure itself).
   */
  timeoutMs?: number;
  timedOut?: (last: Failure) => unknown;
  /** Before each wait, e.g. to log what is waited for; awaited. */
  onRetry?: (failure: Failure & { delayMs: number }) => void | Promise<void>;
  /** Ends the wait at once, and the retries: its reason is thrown. A failure while it is aborted is thrown as it is. */
  signal?: AbortSignal;
  /** Default: the system's. */
  clock?: Clock;
  /** For the jitter (default Math.random). */
  random?: () => number;
}

/** Runs `attempt` (given its number, 1 first) until it resolves, with waits by `backoff` between failures. */
export async function retry<T>(attempt: (n: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const clock = options.clock ?? systemClock;
  const started = clock.now().getTime();
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (error) {
      if (options.signal?.aborted || (options.retryable && !options.retryable(error))) throw error;
      if (options.attempts !== undefined && n >= options.attempts) throw error;
      const failure: Failure = { attempt: n, error, elapsedMs: clock.now().getTime() - started };
      const left = (options.timeoutMs ?? Infinity) - failure.elapsedMs;
      if (left <= 0) throw options.timedOut ? await options.timedOut(failure) : error;
      const delayMs = Math.min(backoffDelay(options.backoff, n, options.random), left);
      await options.onRetry?.({ ...failure, delayMs });
      await clock.sleep(delayMs, options.signal);
      options.signal?.throwIfAborted();
    }
  }
}
