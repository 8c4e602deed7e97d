/**
 * One LISTEN connection per agents process, fanned out to the event streams this process serves:
 * a notification on `agent_runs` (a step or a status change committed, on whichever replica ran
 * it) wakes the streams of that run, which then read what they have not sent from the database.
 * The notification only says "look again": the rows are the truth, so a notification lost while
 * the connection was down costs nothing but time (every stream is woken when it is back, and
 * streams also look again at each heartbeat).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createPool, type Pool, type PoolClient } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import type { Worker, WorkerContext } from '@workauto/service';
import { RUN_CHANNEL } from '../repo/runs.js';

/** How long a lost LISTEN connection waits before it is tried again. */
const RECONNECT_MS = 2_000;
/** How often the idle listener tells the supervisor it is alive. */
const BEAT_MS = 5_000;

export class RunEventHub {
  private readonly subscribers = new Map<string, Set<() => void>>();
  private readonly closing = new AbortController();
  private readonly pool: Pool;

  constructor(
    databaseUrl: string,
    private readonly logger: Logger,
  ) {
    // A pool of one, for the one connection that only listens (never a slot of the service's pool).
    this.pool = createPool(databaseUrl, { max: 1, applicationName: 'agents-run-events' });
  }

  /** Aborted when the service stops: open streams end, telling their clients to reconnect elsewhere. */
  get stopping(): AbortSignal {
    return this.closing.signal;
  }

  /** Streams open in this process (a stream subscribes for its whole life). */
  get streams(): number {
    let n = 0;
    for (const set of this.subscribers.values()) n += set.size;
    return n;
  }

  /**
   * Wakes the subscription at each change of the run until it is closed. Subscribe before reading
   * the run's events: a change that commits during the read then wakes the next wait at once.
   */
  subscribe(runId: string): Subscription {
    let set = this.subscribers.get(runId);
    if (!set) this.subscribers.set(runId, (set = new Set()));
    const subscription = new Subscription(() => {
      set.delete(subscription.notify);
      if (set.size === 0 && this.subscribers.get(runId) === set) this.subscribers.delete(runId);
    });
    set.add(subscription.notify);
    return subscription;
  }

  private wake(runId: string): void {
    for (const wake of this.subscribers.get(runId) ?? []) wake();
  }

  private wakeAll(): void {
    for (const set of this.subscribers.values()) for (const wake of set) wake();
  }

  private readonly onNotification = (msg: { channel: string; payload?: string | undefined }) => {
    if (msg.channel !== RUN_CHANNEL || !msg.payload) return;
    try {
      const { run_id: runId } = JSON.parse(msg.payload) as { run_id?: unknown };
      if (typeof runId === 'string') this.wake(runId);
    } catch {
      this.logger.warn({ channel: msg.channel }, 'a notification on agent_runs was not JSON; ignored');
    }
  };

  worker(): Worker {
    return { name: 'agent-run-events', run: (ctx) => this.run(ctx) };
  }

  /** Listens until the service stops; a lost connection is replaced after RECONNECT_MS. */
  private async run(ctx: WorkerContext): Promise<void> {
    const { signal } = ctx;
    const stopped = new Promise<'stop'>((resolve) =>
      signal.aborted ? resolve('stop') : signal.addEventListener('abort', () => resolve('stop'), { once: true }),
    );
    try {
      while (!signal.aborted) {
        ctx.beat();
        let client: PoolClient | undefined;
        try {
          client = await this.pool.connect();
          const c = client;
          const lost = new Promise<Error>((resolve) => c.once('error', resolve));
          c.on('notification', this.onNotification);
          await c.query(`LISTEN ${RUN_CHANNEL}`);
          // Whatever committed while nobody listened: every stream looks again.
          this.wakeAll();
          for (;;) {
            const next = await Promise.race([lost, stopped, sleep(BEAT_MS, 'beat' as const, { ref: false })]);
            if (next === 'stop') break;
            if (next instanceof Error) throw next;
            ctx.beat();
          }
        } catch (err) {
          // The signal may abort while the loop awaits; TypeScript keeps the narrowing of the loop's test.
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
          if (signal.aborted) break;
          this.logger.warn(
            { err, retry_in_ms: RECONNECT_MS },
            'lost the connection that listens for run progress; live views look again at each heartbeat until it is back',
          );
          this.wakeAll();
          await sleep(RECONNECT_MS, undefined, { signal }).catch(() => undefined);
        } finally {
          client?.removeListener('notification', this.onNotification);
          client?.release(true); // closed, never back to the pool: it listened
        }
      }
    } finally {
      if (signal.aborted) {
        // Open streams end now, each with a comment telling its client to reconnect (another replica takes it).
        this.closing.abort();
        await this.pool.end().catch(() => undefined);
      }
    }
  }
}

/** One stream's view of its run's changes: a flag set by each notification, and a wait for it. */
export class Subscription {
  private pending = false;
  private woken: (() => void) | undefined;

  constructor(readonly close: () => void) {}

  readonly notify = (): void => {
    this.pending = true;
    this.woken?.();
  };

  /** True as soon as a change came (also one before the call); false after ms, or once a signal aborts. */
  async wait(ms: number, signals: AbortSignal[]): Promise<boolean> {
    if (!this.pending && ms > 0 && !signals.some((s) => s.aborted)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          for (const s of signals) s.removeEventListener('abort', done);
          this.woken = undefined;
          resolve();
        };
        const timer = setTimeout(done, ms);
        for (const s of signals) s.addEventListener('abort', done, { once: true });
        this.woken = done;
      });
    }
    const woke = this.pending;
    this.pending = false;
    return woke;
  }
}
