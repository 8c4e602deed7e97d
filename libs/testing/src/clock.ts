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
      signal?.addEventListener('abort', sleeper.wake, { once: true });
    });
  }

  /** How many sleeps wait on this clock now (a loop waiting for its next turn is one). */
  get sleeping(): number {
    return this.sleepers.size;
  }

  /**
   * Moves the clock forward, ends the sleeps that are over and resolves once as many sleeps wait as
   * before: every loop it woke has run its turn and waits again (the sentinel that the turn ended).
   */
  async advance(ms: number, timeoutMs = 20_000): Promise<void> {
    const before = this.sleepers.size;
    this.at += ms;
    for (const s of [...this.sleepers]) if (s.until <= this.at) s.wake();
    await eventually(
      `every loop waits on the clock again after it moved ${ms} ms`,
      () => this.sleepers.size >= before,
      timeoutMs,
      5,
    );
  }
}
