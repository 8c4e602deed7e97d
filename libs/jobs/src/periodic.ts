import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Pool } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { systemClock, type Clock } from '@workauto/retry';
import { RENEW } from './queue.js';

// The time a periodic worker reads and waits on: the system's, or one a test moves (ManualClock).
export { systemClock, type Clock };

/** What one tick of a periodic worker is given. */
export interface TickContext {
  /** Aborted on shutdown (and when the lease of a one-replica worker was lost): stop at the next safe point. */
  signal: AbortSignal;
  /** The clock's time when the tick started. */
  now: Date;
  /** Proof of progress for the service's stuck-loop check: call it between the batches of a long tick. */
  beat(): void;
}

interface CommonOptions {
  /** The loop's name (logs, the stuck-loop check) and, with `replicas: 'one'`, its row in `jobs`. */
  name: string;
  /** Between the end of a tick and the next one. */
  everyMs: number;
  /** Each wait lasts up to jitter × everyMs longer (default 0.1), so replicas do not tick in step. */
  jitter?: number;
  logger: Logger;
  /** Default: the system's. */
  clock?: Clock;
  tick(ctx: TickContext): Promise<void>;
}

export type PeriodicOptions = CommonOptions &
  (
    | {
        /** Each replica ticks on its own (the tick shares its work by row locks, or its work is the replica's own). */
        replicas: 'every';
      }
    | {
        /**
         * One replica at a time, once per interval across all of them: the schedule is one row of the
         * service's `jobs` table (JOBS_MIGRATIONS) that a replica claims under the queue's lease,
         * renewed while the tick runs; a replica that vanishes mid-tick loses it after leaseMs.
         */
        replicas: 'one';
        pool: Pool;
        /** Default 30 s, renewed every third of it. */
        leaseMs?: number;
      }
  );

/** Waiting is not being stuck: a waiting loop beats this often (the service's check allows 60 s). */
const WAITING_BEAT_MS = 10_000;

/**
 * A service's periodic work (a schedule check, a retention sweep, moving an index forward) as one
 * worker of @workauto/service: a tick when it starts, then one every `everyMs` after the previous
 * ended, on every replica or on one at a time. A tick that throws is logged and runs again at the
 * next turn; on shutdown the tick in flight sees its signal abort and the loop returns after it.
 */
export class PeriodicWorker {
  readonly name: string;
  private readonly clock: Clock;
  /** Identifies this worker's lease (host, pid, a random part). */
  private readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly rowId: string;
  private woken = false;
  private endWait: (() => void) | undefined;

  constructor(private readonly options: PeriodicOptions) {
    this.name = options.name;
    this.clock = options.clock ?? systemClock;
    // One row per name, the same on every replica.
    const hex = createHash('sha256').update(`periodic:${options.name}`).digest('hex');
    this.rowId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
  }

  /** Ticks now instead of at the end of the wait (with `replicas: 'one'`, unless another replica's tick runs). */
  wake(): void {
    this.woken = true;
    this.endWait?.();
  }

  async run(ctx: { signal: AbortSignal; graceMs: number; beat(): void }): Promise<void> {
    const { options } = this;
    // A replica starting makes the row due: its first tick runs at once, as with every replica.
    if (options.replicas === 'one') await this.ensureRow(options.pool);
    while (!ctx.signal.aborted) {
      ctx.beat();
      let waitMs = options.everyMs;
      try {
        waitMs = options.replicas === 'one' ? await this.turnOfOne(options.pool, ctx) : await this.turnOfEvery(ctx);
      } catch (err) {
        options.logger.warn(
          { err, worker: this.name, retry_in_ms: waitMs },
          'periodic work could not run (is the database reachable?); trying again',
        );
      }
      await this.wait(waitMs + Math.random() * (options.jitter ?? 0.1) * options.everyMs, ctx);
    }
  }

  private async turnOfEvery(ctx: { signal: AbortSignal; beat(): void }): Promise<number> {
    this.woken = false;
    await this.tick({ signal: ctx.signal, now: this.clock.now(), beat: ctx.beat });
    return this.options.everyMs;
  }

  /** Claims the row if due (or woken) and runs the tick under its lease; returns how long to wait. */
  private async turnOfOne(pool: Pool, ctx: { signal: AbortSignal; beat(): void }): Promise<number> {
    const { everyMs } = this.options;
    const leaseMs = (this.options.replicas === 'one' && this.options.leaseMs) || 30_000;
    const now = this.clock.now();
    const force = this.woken;
    this.woken = false;
    const claimed = await pool.query(
      `UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = $2,
         lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
       WHERE id = $1 AND ((state = 'queued' AND ($5 OR next_attempt_at <= $4))
                          OR (state = 'running' AND (lease_expires_at < now() OR lease_owner = $2)))
       RETURNING id`,
      [this.rowId, this.owner, leaseMs, now, force],
    );
    if (!claimed.rowCount) {
      // Another replica ticks now (wait a turn), or the next tick is not due yet (wait until it is).
      const { rows } = await pool.query<{ next: Date | null }>(
        `SELECT CASE WHEN state = 'queued' THEN next_attempt_at END AS next FROM jobs WHERE id = $1`,
        [this.rowId],
      );
      const next = rows[0]?.next;
      return next ? Math.min(Math.max(0, next.getTime() - now.getTime()), everyMs) : everyMs;
    }
    const lost = new AbortController();
    const stop = () => lost.abort(ctx.signal.reason);
    ctx.signal.addEventListener('abort', stop, { once: true });
    const renew = setInterval(() => {
      pool.query(RENEW([leaseMs, [this.rowId], this.owner])).then(
        (r) => {
          if (!r.rowCount) lost.abort(new Error('lease lost: another replica took the periodic work over'));
        },
        (err: unknown) =>
          this.options.logger.warn({ err, worker: this.name }, 'could not renew the lease of periodic work; retrying'),
      );
    }, leaseMs / 3);
    try {
      await this.tick({ signal: lost.signal, now, beat: ctx.beat });
    } finally {
      clearInterval(renew);
      ctx.signal.removeEventListener('abort', stop);
    }
    // Cut short by a shutdown: due at once, so another replica finishes it.
    const next = ctx.signal.aborted ? now : new Date(this.clock.now().getTime() + everyMs);
    await pool.query(
      `UPDATE jobs SET state = 'queued', next_attempt_at = $3, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
       WHERE id = $1 AND state = 'running' AND lease_owner = $2`,
      [this.rowId, this.owner, next],
    );
    return everyMs;
  }

  private async tick(ctx: TickContext): Promise<void> {
    try {
      await this.options.tick(ctx);
    } catch (err) {
      if (ctx.signal.aborted) return;
      this.options.logger.warn(
        { err, worker: this.name, retry_in_ms: this.options.everyMs },
        'periodic work failed; it runs again at its next turn',
      );
    }
  }

  private async ensureRow(pool: Pool): Promise<void> {
    await pool.query(
      `INSERT INTO jobs (id, queue, payload, max_attempts, next_attempt_at) VALUES ($1, $2, '{}', 1, $3)
       ON CONFLICT (id) DO UPDATE SET next_attempt_at = least(jobs.next_attempt_at, excluded.next_attempt_at),
         state = CASE WHEN jobs.state = 'running' THEN 'running' ELSE 'queued' END, finished_at = NULL, updated_at = now()`,
      [this.rowId, `periodic:${this.name}`, this.clock.now()],
    );
  }

  private async wait(ms: number, ctx: { signal: AbortSignal; beat(): void }): Promise<void> {
    if (this.woken || ctx.signal.aborted) return;
    const ended = new AbortController();
    const end = () => ended.abort();
    this.endWait = end;
    ctx.signal.addEventListener('abort', end, { once: true });
    const beat = setInterval(ctx.beat, WAITING_BEAT_MS);
    try {
      await this.clock.sleep(ms, ended.signal);
    } finally {
      clearInterval(beat);
      ctx.signal.removeEventListener('abort', end);
      this.endWait = undefined;
    }
  }
}
