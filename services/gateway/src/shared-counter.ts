/**
 * Allowances per key and minute that every gateway replica shares (docs/decisions.md, "Rate limits
 * across gateway replicas"): what the replicas together took of a key's limit this minute is a row
 * of the gateway's own PostgreSQL database. A replica takes a lease of 1 % of the limit at a time
 * (at least 1) and admits from it without a round trip; the leases of many keys are taken in one
 * statement. Leases never add up to more than the limit, so the replicas together admit at most
 * the limit, and at least the limit less the unused leases of the other replicas ((replicas − 1) %).
 *
 * Every admission of the gateway counts through the one RateCounter interface: the per-credential
 * and failed-authentication limiters (rate-limit.ts) and the tenant's limits.
 */
import type { Pool } from '@workauto/db';
import type { Logger } from '@workauto/logger';

export const WINDOW_MS = 60_000;

export interface RateDecision {
  allowed: boolean;
  /** What this key's requests have taken of the limit this minute, across replicas (as far as this replica knows). */
  used: number;
  /** When the minute ends and the allowance is whole again. */
  resetTime: Date;
}

/** Counts a key's requests against a per-minute limit shared by every gateway replica. */
export interface RateCounter {
  /** Takes `cost` (1 by default) of the key's `limit` for this minute; refused once the replicas together have taken the limit. */
  take(key: string, limit: number, cost?: number): Promise<RateDecision>;
  /**
   * Gives back what a request took (or was refused) that turned out not to count, e.g. one that
   * authenticated, for the failed-auth limit; a refused request's give-back makes no room.
   */
  giveBack(key: string, cost?: number): void;
  stop(): void;
}

/** The lease a replica takes at a time: 1 % of the limit, at least 1, at most 1,000. */
function leaseSize(limit: number): number {
  return Math.max(1, Math.min(1_000, Math.floor(limit / 100)));
}

interface KeyState {
  window: number;
  /** Taken from the shared row, not yet used by this replica. */
  lease: number;
  /** What the shared row said the replicas had taken, less this replica's unused lease: the `used` a decision reports. */
  sharedTaken: number;
  /** The shared row had no more: refuse until the minute ends. */
  exhausted: boolean;
  /** Counted here alone while the database does not answer (each replica then allows the whole limit). */
  localTaken: number;
  /** What refused requests would have taken (a give-back of theirs returns nothing). */
  refused: number;
  /** What the requests waiting for a lease need together. */
  waiting: number;
  pending?: Promise<void>;
}

interface Ask {
  key: string;
  state: KeyState;
  want: number;
  limit: number;
  done: () => void;
}

/** Rows of windows older than this many minutes are deleted. */
const KEEP_WINDOWS = 2;

export class SharedRateCounter implements RateCounter {
  private readonly keys = new Map<string, KeyState>();
  private queue: Ask[] = [];
  private flushing = false;
  private sweeper: NodeJS.Timeout | undefined;
  private warnedAt = 0;

  constructor(
    private readonly pool: Pool,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  startSweeping(): void {
    this.sweeper = setInterval(() => void this.sweep(), WINDOW_MS);
    this.sweeper.unref();
  }

  async take(key: string, limit: number, cost = 1): Promise<RateDecision> {
    const window = Math.floor(this.now() / WINDOW_MS);
    let state = this.keys.get(key);
    if (!state || state.window !== window) {
      state = { window, lease: 0, sharedTaken: 0, exhausted: false, localTaken: 0, refused: 0, waiting: 0 };
      this.keys.set(key, state);
    }
    // Each ask either grants something or marks the key exhausted, so this ends. Concurrent requests
    // of one key wait for one ask; the next one takes enough for all those still waiting.
    state.waiting += cost;
    try {
      for (;;) {
        if (state.lease >= cost) {
          state.lease -= cost;
          return this.decision(state, true, limit);
        }
        if (state.exhausted) {
          state.refused += cost;
          return this.decision(state, false, limit);
        }
        state.pending ??= this.ask(key, state, Math.max(leaseSize(limit), state.waiting - state.lease), limit);
        await state.pending;
      }
    } finally {
      state.waiting -= cost;
    }
  }

  giveBack(key: string, cost = 1): void {
    const state = this.keys.get(key);
    if (!state || state.window !== Math.floor(this.now() / WINDOW_MS)) return;
    // A refused request took nothing: giving its cost back must not make room.
    const refused = Math.min(state.refused, cost);
    state.refused -= refused;
    state.lease += cost - refused;
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  private decision(state: KeyState, allowed: boolean, limit: number): RateDecision {
    return {
      allowed,
      used: allowed ? Math.min(limit, Math.max(0, state.sharedTaken - state.lease)) : limit + 1,
      resetTime: new Date((state.window + 1) * WINDOW_MS),
    };
  }

  private ask(key: string, state: KeyState, want: number, limit: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.queue.push({ key, state, want, limit, done: resolve });
      if (!this.flushing) {
        this.flushing = true;
        // The asks of this turn of the event loop (and of every turn while a statement runs) go together.
        setImmediate(() => void this.flush());
      }
    }).finally(() => {
      state.pending = undefined;
    });
  }

  private async flush(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue;
      this.queue = [];
      try {
        const { rows } = await this.pool.query<{ window_minute: string; key: string; taken: string }>(
          `INSERT INTO rate_allowances AS a (window_minute, key, taken)
           SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[])
           ON CONFLICT (window_minute, key) DO UPDATE SET taken = a.taken + excluded.taken
           RETURNING window_minute, key, taken`,
          [batch.map((a) => a.state.window), batch.map((a) => a.key), batch.map((a) => a.want)],
        );
        const taken = new Map(rows.map((r) => [`${r.window_minute}/${r.key}`, Number(r.taken)]));
        for (const a of batch) {
          const total = taken.get(`${a.state.window}/${a.key}`) ?? a.want;
          // The row counts every ask in full, granted or not: what was there before this one is total − want.
          const granted = Math.max(0, Math.min(a.want, a.limit - (total - a.want)));
          a.state.lease += granted;
          a.state.sharedTaken = Math.min(a.limit, total);
          if (granted < a.want) a.state.exhausted = true;
        }
      } catch (err) {
        // The database does not answer: each replica counts alone (the limit per replica, as before
        // the counters were shared) rather than refusing or admitting everything.
        const now = this.now();
        if (now - this.warnedAt > WINDOW_MS) {
          this.warnedAt = now;
          this.logger.warn(
            { err },
            'rate limits are counted per gateway replica until the gateway database answers again',
          );
        }
        for (const a of batch) {
          const granted = Math.max(0, Math.min(a.want, a.limit - a.state.localTaken));
          a.state.localTaken += granted;
          a.state.lease += granted;
          a.state.sharedTaken = a.state.localTaken;
          if (granted < a.want) a.state.exhausted = true;
        }
      }
      for (const a of batch) a.done();
    }
    this.flushing = false;
  }

  private async sweep(): Promise<void> {
    const window = Math.floor(this.now() / WINDOW_MS);
    for (const [key, state] of this.keys) if (state.window < window) this.keys.delete(key);
    try {
      await this.pool.query('DELETE FROM rate_allowances WHERE window_minute < $1', [window - KEEP_WINDOWS + 1]);
    } catch {
      // The next sweep deletes them.
    }
  }
}
