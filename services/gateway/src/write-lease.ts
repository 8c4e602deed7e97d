/**
 * When writes may be authenticated from this replica's cache (docs/identity.md, "The gateway's
 * authentication cache"). Identity counts, in a revocation epoch bumped in the transaction of every
 * change that may take a grant away, and answers each such change only its write lease (ms) after it
 * committed. This replica reads the epoch every quarter lease while writes come: a new epoch makes
 * it forget every cached credential, and for 90 % of the lease after *sending* a read its writes may
 * use the cache. So when a revocation is answered, this replica has either read the new epoch and
 * forgotten the old grant, or its lease from an older read has lapsed and its writes ask identity.
 * Identity away, or a lease of 0: every write asks identity, as reads past the cache's TTL do.
 */
import { monotonicClock, type Clock } from '@workauto/retry';
import type { Logger } from '@workauto/logger';

/** What identity answers (GetRevocationEpoch). */
export interface RevocationEpoch {
  epoch: number;
  write_lease_ms: number;
}

/** Without writes for this long the reads stop (an idle replica costs identity nothing); the next write starts them. */
const IDLE_MS = 30_000;
/** Between reads when identity gave no lease (0, or a read failed). */
const NO_LEASE_RECHECK_MS = 1_000;
/** Kept back from identity's lease for clocks that do not run quite alike and timers that fire late. */
const LEASE_SHARE = 0.9;

export class WriteLease {
  private epoch: number | undefined;
  /** On the monotonic clock: until when writes may use the cache. */
  private validUntil = -Infinity;
  private lastWrite = -Infinity;
  private running: Promise<void> | undefined;
  private readonly stopped = new AbortController();

  constructor(
    /** GetRevocationEpoch at identity. */
    private readonly read: () => Promise<RevocationEpoch>,
    /** Forgets every cached credential (Authenticator.clear). */
    private readonly forget: () => void,
    private readonly logger?: Logger,
    private readonly clock: Clock = monotonicClock,
  ) {}

  /** Whether a write arriving now may be authenticated from the cache; keeps the epoch reads going while writes come. */
  writesMayUseCache(): boolean {
    const now = this.clock.now().getTime();
    this.lastWrite = now;
    if (!this.running && !this.stopped.signal.aborted)
      this.running = this.run().finally(() => (this.running = undefined));
    return now < this.validUntil;
  }

  /** Whether the epoch is being read (writes came within the last 30 s). */
  get reading(): boolean {
    return this.running !== undefined;
  }

  /** Ends the reads (the gateway closes). */
  async stop(): Promise<void> {
    this.stopped.abort();
    await this.running;
  }

  private async run(): Promise<void> {
    let failing = false;
    while (!this.stopped.signal.aborted && this.clock.now().getTime() - this.lastWrite < IDLE_MS) {
      const sent = this.clock.now().getTime();
      let nextMs = NO_LEASE_RECHECK_MS;
      try {
        const { epoch, write_lease_ms: leaseMs } = await this.read();
        // Forgotten before the lease is extended: nothing cached before this read outlives a change it missed.
        if (epoch !== this.epoch) this.forget();
        this.epoch = epoch;
        if (leaseMs > 0) {
          this.validUntil = sent + leaseMs * LEASE_SHARE;
          nextMs = leaseMs / 4;
        }
        if (failing) this.logger?.info('the revocation epoch is readable again: writes use the authentication cache');
        failing = false;
      } catch (err) {
        if (!failing)
          this.logger?.warn(
            { err: (err as Error).message },
            'could not read the revocation epoch from identity: writes ask identity every time until it answers',
          );
        failing = true;
      }
      await this.clock.sleep(nextMs, this.stopped.signal);
    }
  }
}
