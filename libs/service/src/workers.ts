import type { Logger } from '@workauto/logger';
import { backoffDelay, systemClock, type Clock } from '@workauto/retry';

/** What a background loop is given each time it is (re)started. */
export interface WorkerContext {
  /** Aborted on shutdown: stop taking work, finish or release what is in flight within graceMs, return. */
  signal: AbortSignal;
  /** How long in-flight work may take to finish after the signal (the rest is released). */
  graceMs: number;
  /** Call at least every `stuckAfterMs` (each loop turn, including turns that failed): proof of progress. */
  beat(): void;
}

/** A background loop of a service (job workers, probes, schedulers): run() returns only when signal aborts. */
export interface Worker {
  name: string;
  run(ctx: WorkerContext): Promise<void>;
}

export interface WorkerOptions {
  /** After the signal, how long in-flight work may take (default 10 s). */
  graceMs?: number;
  /** A loop without a beat for this long is stuck (default 60 s). */
  stuckAfterMs?: number;
  /** How often beats are checked (default stuckAfterMs / 4). */
  checkEveryMs?: number;
  /** First restart delay after a crash; doubles up to 30 s (default 1 s). */
  restartDelayMs?: number;
  /** What restart waits, and how long a loop ran, are measured on (default the system's clock). */
  clock?: Clock;
}

/** A loop that ran this long before it failed is restarted after the first delay again. */
const RAN_A_GOOD_WHILE_MS = 60_000;

/**
 * Runs a service's workers. A loop that throws (or returns before shutdown) is logged and started
 * again after a backoff: a crash is usually a dependency's fault and restarting the loop is cheaper
 * than the process. A loop that stops beating is stuck — JavaScript cannot interrupt it — so
 * `onStuck(true)` is called (the service turns its liveness NOT_SERVING and the orchestrator
 * restarts the process); `onStuck(false)` when every loop beats again.
 */
export class WorkerSupervisor {
  private readonly controller = new AbortController();
  private readonly runs: Promise<void>[] = [];
  private readonly lastBeat = new Map<string, number>();
  private readonly stuck = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly graceMs: number;
  private readonly stuckAfterMs: number;

  constructor(
    private readonly workers: Worker[],
    private readonly logger: Logger,
    private readonly onStuck: (stuck: boolean) => void,
    private readonly options: WorkerOptions = {},
  ) {
    this.graceMs = options.graceMs ?? 10_000;
    this.stuckAfterMs = options.stuckAfterMs ?? 60_000;
  }

  start(): void {
    for (const worker of this.workers) {
      this.lastBeat.set(worker.name, Date.now());
      this.runs.push(this.supervise(worker));
    }
    if (this.workers.length) {
      this.timer = setInterval(
        () => this.checkBeats(),
        this.options.checkEveryMs ?? Math.max(50, this.stuckAfterMs / 4),
      );
      this.timer.unref();
    }
  }

  /** Names of the loops that are stuck now. */
  get stuckWorkers(): string[] {
    return [...this.stuck];
  }

  /** Aborts every loop and waits for them: graceMs for in-flight work plus a margin to release the rest. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.controller.abort();
    const margin = this.graceMs + 5_000;
    let timeout: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timeout = setTimeout(() => resolve('late'), margin)));
    const result = await Promise.race([Promise.all(this.runs).then(() => 'done' as const), late]);
    clearTimeout(timeout);
    if (result === 'late')
      this.logger.error({ grace_ms: margin }, 'workers did not stop within their grace period; closing anyway');
  }

  private async supervise(worker: Worker): Promise<void> {
    const { signal } = this.controller;
    const { clock = systemClock } = this.options;
    const log = this.logger.child({ worker: worker.name });
    const backoff = { firstMs: this.options.restartDelayMs ?? 1_000, maxMs: 30_000 };
    let restarts = 0; // since the loop last ran a good while
    while (!signal.aborted) {
      const started = clock.now().getTime();
      let crash: { err: unknown } | undefined;
      try {
        await worker.run({ signal, graceMs: this.graceMs, beat: () => this.lastBeat.set(worker.name, Date.now()) });
        // The signal may abort while the worker runs; TypeScript keeps the narrowing of the loop's test.
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
        if (signal.aborted) return;
      } catch (err) {
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- as above
        if (signal.aborted) {
          log.error({ err }, 'worker loop failed while stopping');
          return;
        }
        crash = { err };
      }
      if (clock.now().getTime() - started > RAN_A_GOOD_WHILE_MS) restarts = 0;
      const delay = backoffDelay(backoff, ++restarts);
      if (crash)
        log.error(
          { err: crash.err, restart_in_ms: delay },
          'worker loop crashed; starting it again (see the error for the cause)',
        );
      else log.error({ restart_in_ms: delay }, 'worker loop returned before shutdown; starting it again');
      // Waiting to restart is not being stuck: the silence is counted from the restart.
      this.lastBeat.set(worker.name, Date.now() + delay);
      await clock.sleep(delay, signal);
    }
  }

  private checkBeats(): void {
    const now = Date.now();
    const before = this.stuck.size;
    for (const [name, at] of this.lastBeat) {
      const silentMs = now - at;
      if (silentMs > this.stuckAfterMs && !this.stuck.has(name)) {
        this.stuck.add(name);
        this.logger.error(
          { worker: name, silent_ms: silentMs },
          'worker loop is stuck (no progress); liveness NOT_SERVING so the process is restarted',
        );
      } else if (silentMs <= this.stuckAfterMs && this.stuck.delete(name)) {
        this.logger.info({ worker: name }, 'worker loop makes progress again');
      }
    }
    if (before === 0 && this.stuck.size > 0) this.onStuck(true);
    else if (before > 0 && this.stuck.size === 0) this.onStuck(false);
  }
}
