import { eventually } from './eventually.js';

interface Sleeper {
  until: number;
  wake(): void;
}

/**
 * A clock a test moves by hand: the `Clock` of @workauto/jobs' PeriodicWorker (and of the services
 * that take one), so a schedule is tested by moving time, not by waiting for it.
 */
export class ManualClock {
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
