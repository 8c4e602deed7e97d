/**
 * How tests wait and move time (docs/testing.md, "Time in tests"): `eventually` polls for a
 * condition, `ManualClock` is a clock a test moves by hand, `InstantClock` one whose waits pass at
 * once. They live here, beside the `Clock` they implement and the `retry` loop `eventually` runs on,
 * because this package depends on nothing: the tests of libs/db, libs/grpc and libs/logger reach
 * them too (those packages cannot depend on @workauto/testing, which depends on them; it re-exports
 * these). Imported as '@workauto/retry/testing': production code never loads them.
 */
import { retry, type Clock } from './index.js';

/** What a check answers while the condition does not hold yet. */
type NotYet = false | undefined | null;

/** The failure of a check that answered NotYet: the only one `eventually` tries again after. */
const notYet = new Error('not yet');

/**
 * The one way tests wait for something: polls `check` every `everyMs` until it answers something
 * other than false, undefined or null, and returns that (`true`, or the record it found); throws
 * naming `what` after `ms` (a function is asked then, to say what it saw). An error `check` throws
 * ends the wait at once. The timeout is a bound on a hang, not a speed target (those live in
 * `make bench`), so it is generous: the machine may be loaded.
 */
export async function eventually<T>(
  what: string | (() => string),
  check: () => T | NotYet | Promise<T | NotYet>,
  ms = 20_000,
  everyMs = 20,
): Promise<Exclude<T, NotYet>> {
  return retry(
    async () => {
      const found = await check();
      if (found === false || found === undefined || found === null) throw notYet;
      return found as Exclude<T, NotYet>;
    },
    {
      backoff: { firstMs: everyMs, factor: 1 },
      retryable: (error) => error === notYet,
      timeoutMs: ms,
      timedOut: () => new Error(`not within ${ms} ms: ${typeof what === 'string' ? what : what()}`),
    },
  );
}

interface Sleeper {
  until: number;
  wake(): void;
}

/**
 * A clock a test moves by hand: the `Clock` of @workauto/jobs' PeriodicWorker (and of the services
 * that take one), so a schedule is tested by moving time, not by waiting for it.
 */
export class ManualClock implements Clock {
  private at: number;
  private readonly sleepers = new Set<Sleeper>();
  /** The most sleeps that waited at once: every loop on this clock, each between two turns. */
  private loops = 0;

  constructor(start: Date | number = Date.now()) {
    this.at = typeof start === 'number' ? start : start.getTime();
  }

  now(): Date {
    return new Date(this.at);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (ms <= 0 || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const sleeper: Sleeper = {
        until: this.at + ms,
        wake: () => {
          this.sleepers.delete(sleeper);
          signal?.removeEventListener('abort', sleeper.wake);
          resolve();
        },
      };
      this.sleepers.add(sleeper);
      this.loops = Math.max(this.loops, this.sleepers.size);
      signal?.addEventListener('abort', sleeper.wake, { once: true });
    });
  }

  /** How many sleeps wait on this clock now (a loop waiting for its next turn is one). */
  get sleeping(): number {
    return this.sleepers.size;
  }

  /**
   * Waits until every loop on this clock waits on it (none is in the middle of a turn), moves the
   * clock forward, ends the sleeps that are over, and resolves once every loop waits again: each
   * loop it woke has run its turn (the sentinel that the turn ended). A test starts moving the
   * clock once each loop has waited on it once (`sleeping` reached their number).
   */
  async advance(ms: number, timeoutMs = 20_000): Promise<void> {
    const allWait = (what: string) =>
      eventually(
        `${what}: ${this.loops} loops wait on the clock`,
        () => this.sleepers.size >= this.loops,
        timeoutMs,
        5,
      );
    await allWait(`before moving the clock ${ms} ms`);
    this.at += ms;
    for (const s of [...this.sleepers]) if (s.until <= this.at) s.wake();
    await allWait(`after moving the clock ${ms} ms`);
  }
}

/**
 * A clock on which every wait passes at once and moves its time by as much: a loop with an end
 * (a retry up to its deadline, a start-up wait) runs its whole schedule without the wall clock,
 * and `waits` lists the waits it asked for, in order.
 */
export class InstantClock implements Clock {
  private at: number;
  readonly waits: number[] = [];

  constructor(start: Date | number = 0) {
    this.at = typeof start === 'number' ? start : start.getTime();
  }

  now(): Date {
    return new Date(this.at);
  }

  sleep(ms: number): Promise<void> {
    this.waits.push(ms);
    this.at += Math.max(0, ms);
    return Promise.resolve();
  }
}
