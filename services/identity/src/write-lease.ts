/**
 * What lets gateways authenticate writes from their cache without a revoked grant ever writing
 * after its revocation is answered (docs/identity.md, "The gateway's authentication cache"):
 * a gateway may use its cache for writes only within `ms` of sending a revocation-epoch read that
 * found the epoch it knows (a new one makes it forget every cached credential); identity answers
 * every change that may take a grant away only `ms` after it committed. So by the answer, each
 * gateway has either read the new epoch (and forgotten) or its lease from an older read has lapsed.
 */
import { monotonicClock, type Clock } from '@workauto/retry';

export class WriteLease {
  constructor(
    /** AUTH_WRITE_LEASE_MS; 0: gateways never use their cache for writes, and nothing waits. */
    readonly ms: number,
    private readonly clock: Clock = monotonicClock,
  ) {}

  /** Resolves once `ms` have passed on the monotonic clock (a timer may fire early: it waits again). */
  async outlast(): Promise<void> {
    const end = this.clock.now().getTime() + this.ms;
    for (let left = this.ms; left > 0; left = end - this.clock.now().getTime()) await this.clock.sleep(left);
  }

  /**
   * The handler of a change that may take a grant away, answered `ms` after it ran, whatever its
   * outcome: an answer replayed for an Idempotency-Key, or a second revocation of a revoked key,
   * may come moments after the change committed, so they wait as the change itself does.
   */
  answersAfterLease<A extends unknown[], R>(handler: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return async (...args) => {
      try {
        return await handler(...args);
      } finally {
        await this.outlast();
      }
    };
  }
}
