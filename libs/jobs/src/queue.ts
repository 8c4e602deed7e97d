import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { metrics } from '@opentelemetry/api';
import { newId, preparedStatement, withTransaction, type Pool, type PoolClient, type Queryable } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { backoffDelay, retry, systemClock, type Backoff } from '@workauto/retry';
import type { QueryConfig } from 'pg';

/** NOTIFY channel of enqueued jobs (payload: the queue's name). */
const JOBS_CHANNEL = 'workauto_jobs';

/** The jobs table; a service using queues adds it to its ServiceSpec's migrations. */
export const JOBS_MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), '..', 'migrations');

export type JobState = 'queued' | 'running' | 'succeeded' | 'dead';

/** One attempt of a job, as its handler sees it. */
export interface Job<P> {
  id: string;
  queue: string;
  /** The concurrency key (e.g. a webhook endpoint's id), or null. */
  key: string | null;
  payload: P;
  /** 1 for the first attempt. */
  attempt: number;
  maxAttempts: number;
}

/** A job's row, for operations and tests. */
export interface JobStatus {
  id: string;
  state: JobState;
  attempts: number;
  nextAttemptAt: Date;
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  lastError: string | null;
}

export interface EnqueueOptions {
  /** At most the worker's maxPerKey jobs with the same key run at once. */
  key?: string | null;
  /**
   * At most the worker's maxPerGroup jobs with the same group run at once, whatever their keys
   * (e.g. all of one tenant's webhook endpoints, so one tenant cannot take every slot).
   */
  group?: string | null;
  /** Attempts before the job is dead (default 10). */
  maxAttempts?: number;
  /** Not before (default now). */
  runAt?: Date;
}

/** What a handler resolves when it recorded its attempt's success itself (JobWorker.succeeded). */
export const SUCCESS_RECORDED = Symbol('the handler recorded the success');

/** Thrown by a handler: try again after delayMs (e.g. a Retry-After), instead of the worker's schedule. */
export class RetryLater extends Error {
  override name = 'RetryLater';
  constructor(
    readonly delayMs: number,
    message = `retry in ${delayMs} ms`,
  ) {
    super(message);
  }
}

/** Thrown by a handler: retrying cannot help (e.g. the endpoint was deleted); the job is dead now. */
export class PermanentFailure extends Error {
  override name = 'PermanentFailure';
}

export interface WorkerOptions<P> {
  /**
   * Runs an attempt. Resolving records the success; a handler that recorded it itself, in its own
   * statement with JobWorker.succeeded() (one round trip instead of two), resolves SUCCESS_RECORDED.
   */
  handle(job: Job<P>, signal: AbortSignal): Promise<void | typeof SUCCESS_RECORDED>;
  logger: Logger;
  /** Jobs this process runs at once (default 20). */
  concurrency?: number;
  /** Jobs with the same key running at once across every replica (default: no cap). */
  maxPerKey?: number;
  /** Jobs with the same group running at once across every replica (default: no cap). */
  maxPerGroup?: number;
  /** A claim lasts this long and is renewed every leaseMs/3 while the attempt runs (default 30 s). */
  leaseMs?: number;
  /** An attempt running longer fails ("timed out") and is retried on schedule (default 5 min). */
  attemptTimeoutMs?: number;
  /** How often an idle worker looks for due jobs (default 250 ms). */
  pollMs?: number;
  /** Delay before attempt n+1 after attempt n failed (default 1 s · 2^(n-1), at most 1 h, ±20 %). */
  retryDelayMs?(attempt: number): number;
  /** How long succeeded jobs stay in the table before they are deleted (default 24 h). */
  keepSucceededMs?: number;
  /**
   * How long dead jobs stay in the table before they are deleted (default 7 days): requeue() can
   * bring a dead job back only within this time.
   */
  keepDeadMs?: number;
  /** How often the worker deletes finished jobs past keepSucceededMs / keepDeadMs (default 60 s). */
  sweepEveryMs?: number;
  /** How often the worker records the queue's gauges (workauto.jobs.*; default 15 s, one query each time). */
  metricsEveryMs?: number;
  /**
   * Claim at once instead of at the next poll when a job of this queue is enqueued (LISTEN on a
   * pooled connection of its own; a worker always claims again when one of its attempts ends).
   * pollMs then only finds retries that became due and jobs other replicas' attempts made room
   * for. Default false.
   */
  listen?: boolean;
  /**
   * Called in the transaction that makes a job dead (its last attempt failed, a PermanentFailure, or
   * the lease of its last attempt expired), so the record the job works for (a delivery, a run) never
   * stays pending behind a job that will not run again. Must be idempotent and cheap.
   */
  onDead?(tx: PoolClient, job: Job<P>, reason: string): Promise<void>;
  /**
   * Called in the transaction that gives a job back to the queue because this worker is stopping
   * (its attempt outlasted the grace period), so the record the job works for can say so in the
   * same commit (a run back to queued). Must be idempotent and cheap.
   */
  onRelease?(tx: PoolClient, job: Job<P>): Promise<void>;
}

/**
 * A queue backing up: due jobs that no worker runs yet and the age of the oldest (the same for every
 * replica: take the max per queue), and the attempts running in this process. Looked up at each use:
 * the meter provider is registered when telemetry starts.
 */
const gauges = () => {
  const meter = metrics.getMeter('@workauto/jobs');
  return {
    waiting: meter.createGauge('workauto.jobs.waiting', { description: 'Due jobs not yet running', unit: '{job}' }),
    oldestWait: meter.createGauge('workauto.jobs.oldest_wait', {
      description: 'How long the oldest due job has waited to run',
      unit: 's',
    }),
    running: meter.createGauge('workauto.jobs.running', {
      description: 'Attempts running in this process',
      unit: '{job}',
    }),
  };
};
/**
 * The distinct (group, key) pairs with queued jobs of queue $1, walked through the
 * jobs_ready_by_group_and_key index one probe each (a loose index scan): its cost follows the
 * number of pairs, not of the jobs waiting. NULL group or key is '' (jobs' keys and groups are ids).
 */
const QUEUED_PAIRS = `pairs(g, k) AS (
     (SELECT coalesce(group_key, ''), coalesce(concurrency_key, '') FROM jobs
       WHERE queue = $1 AND state = 'queued'
       ORDER BY coalesce(group_key, ''), coalesce(concurrency_key, '') LIMIT 1)
     UNION ALL
     SELECT next.g, next.k FROM pairs p CROSS JOIN LATERAL (
       SELECT coalesce(group_key, '') AS g, coalesce(concurrency_key, '') AS k FROM jobs
        WHERE queue = $1 AND state = 'queued' AND (coalesce(group_key, ''), coalesce(concurrency_key, '')) > (p.g, p.k)
        ORDER BY coalesce(group_key, ''), coalesce(concurrency_key, '') LIMIT 1) next
   )`;
/** The jobs of pair p (of QUEUED_PAIRS), through the same index. */
const PAIR_JOBS = `SELECT id, next_attempt_at FROM jobs
   WHERE queue = $1 AND state = 'queued' AND coalesce(group_key, '') = p.g AND coalesce(concurrency_key, '') = p.k`;

/** Due jobs counted up to 100,000 (a bound on the query's cost); the oldest is the oldest of each pair's first. */
const BACKLOG = `WITH RECURSIVE ${QUEUED_PAIRS}
  SELECT (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE queue = $1 AND state = 'queued' AND next_attempt_at <= now() LIMIT 100000) AS due)::int AS waiting,
    GREATEST(0, EXTRACT(EPOCH FROM now() - (SELECT min(first.next_attempt_at) FROM pairs p CROSS JOIN LATERAL (
      ${PAIR_JOBS} ORDER BY next_attempt_at LIMIT 1) first)))::float8 AS oldest_s`;

/** The default retry schedule of a failed attempt: 1 s, 2 s, 4 s … capped at 1 h, each ±20 %. */
export function exponentialBackoff(attempt: number, firstMs = 1_000, maxMs = 3_600_000): number {
  return Math.round(backoffDelay({ firstMs, maxMs, jitter: 0.2 }, Math.max(1, attempt)));
}

/** Recording an attempt's outcome is tried again after 500 ms and 1 s (a database restarting, a failover). */
const RECORD_OUTCOME_BACKOFF: Backoff = { firstMs: 500 };

interface ClaimedRow {
  id: string;
  concurrency_key: string | null;
  payload: unknown;
  attempts: number;
  max_attempts: number;
}

/*
 * The statements a busy worker runs for every job, prepared once per connection (parsed and
 * planned once, not per call: docs/benchmarks.md, "Webhook deliveries"). The queue is a parameter,
 * so every queue shares them.
 */
/** An attempt's success, only by the lease holder: parameters job id, owner and attempt from $first. */
const succeedSql = (first: number) =>
  `UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, last_error = NULL, finished_at = now(), updated_at = now()
   WHERE id = $${first} AND state = 'running' AND lease_owner = $${first + 1} AND attempts = $${first + 2} RETURNING id`;
const SUCCEED = preparedStatement<[string, string, number]>('jobs_succeed', succeedSql(1));
const FAIL = preparedStatement<[string, string, number, boolean, number, string]>(
  'jobs_fail',
  `UPDATE jobs SET state = CASE WHEN $4 OR attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
     finished_at = CASE WHEN $4 OR attempts >= max_attempts THEN now() END,
     next_attempt_at = now() + $5 * interval '1 millisecond', last_error = $6,
     lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
   WHERE id = $1 AND state = 'running' AND lease_owner = $2 AND attempts = $3
   RETURNING state`,
);
/**
 * The oldest due jobs of keys and groups with room, locked (SKIP LOCKED) for this claim's
 * transaction. Only the pairs whose key and group are below their caps ($2, $3) are looked into: a
 * capped key or group costs one probe of the walk however many of its jobs wait, where a scan in
 * due order had to step over every one of them (and outlasted the statement timeout once a
 * tenant's backlog reached millions, stopping every tenant's jobs). From each pair no more jobs are
 * read than could start ($5 without a key, $6 with one: a key never starts more than its cap), and
 * the chosen ids are one array: as `id IN (subquery)` the generic plan joined every queued job with
 * every candidate (52 ms per claim at 600 queued deliveries, docs/benchmarks.md).
 *
 * Every step has one good plan whatever the statistics say (a queue's are stale by nature: ANALYZE
 * saw it drained, then a burst came): the pairs and their jobs only through
 * jobs_ready_by_group_and_key (no other index covers queued jobs), the rows locked by id through
 * the primary key. The locking select therefore does not test `state`; the row it returns is the
 * newest version (another replica may have started it since this statement's snapshot), so the
 * caller skips rows that are no longer queued, and START tests again.
 */
const CANDIDATES = preparedStatement<[string, number, number, number, number, number]>(
  'jobs_claim_candidates',
  `WITH RECURSIVE ${QUEUED_PAIRS},
   full_keys AS (SELECT concurrency_key AS k FROM jobs WHERE queue = $1 AND state = 'running' AND concurrency_key IS NOT NULL
                 GROUP BY 1 HAVING count(*) >= $2),
   full_groups AS (SELECT group_key AS g FROM jobs WHERE queue = $1 AND state = 'running' AND group_key IS NOT NULL
                   GROUP BY 1 HAVING count(*) >= $3)
   SELECT id, concurrency_key AS key, group_key AS "group", state FROM jobs
    WHERE id = ANY (ARRAY(SELECT due.id FROM pairs p CROSS JOIN LATERAL (
                     ${PAIR_JOBS} AND next_attempt_at <= now()
                      ORDER BY next_attempt_at, id LIMIT CASE WHEN p.k = '' THEN $5::int ELSE $6::int END) due
                   WHERE NOT EXISTS (SELECT 1 FROM full_keys f WHERE f.k = p.k)
                     AND NOT EXISTS (SELECT 1 FROM full_groups f WHERE f.g = p.g)
                   ORDER BY due.next_attempt_at, due.id LIMIT $4))
    ORDER BY next_attempt_at, id FOR UPDATE SKIP LOCKED`,
);
/** Takes what it can of the keys' and groups' locks (never waits); returns the ones it holds. */
const LOCK = preparedStatement<[string, string[], string[]]>(
  'jobs_lock_keys_and_groups',
  `SELECT 'k' AS kind, k AS name FROM unnest($2::text[]) AS k WHERE pg_try_advisory_xact_lock(hashtextextended($1 || chr(31) || k, 0))
   UNION ALL
   SELECT 'g', g FROM unnest($3::text[]) AS g WHERE pg_try_advisory_xact_lock(hashtextextended($1 || chr(30) || g, 0))`,
);
const RUNNING = preparedStatement<[string, string[], string[]]>(
  'jobs_running_per_key_and_group',
  `SELECT 'k' AS kind, concurrency_key AS name, count(*)::int AS n FROM jobs WHERE queue = $1 AND state = 'running' AND concurrency_key = ANY($2) GROUP BY 2
   UNION ALL
   SELECT 'g', group_key, count(*)::int FROM jobs WHERE queue = $1 AND state = 'running' AND group_key = ANY($3) GROUP BY 2`,
);
/** Whether any job of the queue is due: what an idle queue's poll asks before it claims (jobs_ready answers it). */
const ANY_DUE = preparedStatement<[string]>(
  'jobs_any_due',
  `SELECT 1 FROM jobs WHERE queue = $1 AND state = 'queued' AND next_attempt_at <= now() LIMIT 1`,
);
/** Whether any attempt of the queue outlived its lease: what takeBackExpiredLeases asks first. */
const ANY_EXPIRED = preparedStatement<[string]>(
  'jobs_any_expired',
  `SELECT 1 FROM jobs WHERE queue = $1 AND state = 'running' AND lease_expires_at < now() LIMIT 1`,
);
const START = preparedStatement<[string, number, string[]]>(
  'jobs_start',
  `UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = $1, lease_expires_at = now() + $2 * interval '1 millisecond', updated_at = now()
   WHERE id = ANY($3) AND state = 'queued' RETURNING id, concurrency_key, payload, attempts, max_attempts`,
);
export const RENEW = preparedStatement<[number, string[], string]>(
  'jobs_renew',
  `UPDATE jobs SET lease_expires_at = now() + $1 * interval '1 millisecond'
   WHERE id = ANY($2) AND state = 'running' AND lease_owner = $3 RETURNING id`,
);

/**
 * A named queue in the service's own database (table `jobs`): enqueue inside the transaction that
 * makes the work necessary, run with worker(). Delivery is at least once: a handler must tolerate
 * running a job again (a replica that died mid-attempt loses its lease and the attempt runs again).
 */
export class JobQueue<P> {
  constructor(readonly name: string) {}

  async enqueue(db: Queryable, payload: P, options: EnqueueOptions = {}): Promise<string> {
    const id = newId();
    // The notification (delivered on commit) wakes the queue's listening workers.
    await db.query(
      `WITH job AS (INSERT INTO jobs (id, queue, concurrency_key, group_key, payload, max_attempts, next_attempt_at)
                    VALUES ($1, $2, $3, $7, $4, $5, coalesce($6, now())) RETURNING queue)
       SELECT pg_notify('${JOBS_CHANNEL}', queue) FROM job`,
      [
        id,
        this.name,
        options.key ?? null,
        JSON.stringify(payload),
        options.maxAttempts ?? 10,
        options.runAt ?? null,
        options.group ?? null,
      ],
    );
    return id;
  }

  /** Several jobs in one statement (one round trip), ids in the order given. */
  async enqueueMany(db: Queryable, jobs: readonly { payload: P; options?: EnqueueOptions }[]): Promise<string[]> {
    if (!jobs.length) return [];
    const ids = jobs.map(() => newId());
    await db.query(
      `WITH job AS (INSERT INTO jobs (id, queue, concurrency_key, group_key, payload, max_attempts, next_attempt_at)
                    SELECT id, $2, key, grp, payload, max_attempts, coalesce(run_at, now())
                      FROM unnest($1::uuid[], $3::text[], $7::text[], $4::jsonb[], $5::int[], $6::timestamptz[]) AS j(id, key, grp, payload, max_attempts, run_at)
                    RETURNING queue)
       SELECT pg_notify('${JOBS_CHANNEL}', $2) WHERE EXISTS (SELECT 1 FROM job)`,
      [
        ids,
        this.name,
        jobs.map((j) => j.options?.key ?? null),
        jobs.map((j) => JSON.stringify(j.payload)),
        jobs.map((j) => j.options?.maxAttempts ?? 10),
        jobs.map((j) => j.options?.runAt ?? null),
        jobs.map((j) => j.options?.group ?? null),
      ],
    );
    return ids;
  }

  async status(db: Queryable, id: string): Promise<JobStatus | undefined> {
    const { rows } = await db.query<{
      id: string;
      state: JobState;
      attempts: number;
      next_attempt_at: Date;
      lease_owner: string | null;
      lease_expires_at: Date | null;
      last_error: string | null;
    }>(
      `SELECT id, state, attempts, next_attempt_at, lease_owner, lease_expires_at, last_error FROM jobs WHERE queue = $1 AND id = $2`,
      [this.name, id],
    );
    const r = rows[0];
    return (
      r && {
        id: r.id,
        state: r.state,
        attempts: r.attempts,
        nextAttemptAt: r.next_attempt_at,
        leaseOwner: r.lease_owner,
        leaseExpiresAt: r.lease_expires_at,
        lastError: r.last_error,
      }
    );
  }

  /**
   * A dead job runs again from its first attempt; false if it is not dead, or was deleted (dead jobs
   * are kept for the worker's keepDeadMs, 7 days by default).
   */
  async requeue(db: Queryable, id: string): Promise<boolean> {
    const { rowCount } = await db.query(
      `UPDATE jobs SET state = 'queued', attempts = 0, next_attempt_at = now(), finished_at = NULL, updated_at = now()
       WHERE queue = $1 AND id = $2 AND state = 'dead'`,
      [this.name, id],
    );
    return rowCount === 1;
  }

  /**
   * Which of `keys` have a job waiting (queued, not yet running). Exact when the caller holds a lock
   * that every enqueue of those keys takes too (the apps scheduler holds the apps' rows), so it can
   * enqueue only what is not waiting already.
   */
  async queuedKeys(db: Queryable, keys: readonly string[]): Promise<Set<string>> {
    if (!keys.length) return new Set();
    const { rows } = await db.query<{ key: string }>(
      // coalesce: the expression of jobs_ready_by_group_and_key, read by a skip scan over its groups.
      `SELECT DISTINCT concurrency_key AS key FROM jobs WHERE queue = $1 AND state = 'queued' AND coalesce(concurrency_key, '') = ANY($2)`,
      [this.name, keys],
    );
    return new Set(rows.map((r) => r.key));
  }

  worker(pool: Pool, options: WorkerOptions<P>): JobWorker<P> {
    return new JobWorker(this.name, pool, options);
  }
}

interface Attempt<P> {
  job: Job<P>;
  abort: AbortController;
  done: Promise<void>;
}

/**
 * Runs a queue's jobs: claims due ones (FOR UPDATE SKIP LOCKED, so replicas never take the same
 * job; per-key caps are counted under a transaction-scoped advisory lock per key), renews the
 * leases of running attempts, and records each outcome only if it still holds the lease. Its run()
 * fits a service's `workers` hook (@workauto/service).
 */
export class JobWorker<P> {
  readonly name: string;
  /** Identifies this worker's leases (host, pid, a random part). */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly inFlight = new Map<string, Attempt<P>>();
  /** Attempts released on shutdown: their late outcomes are not written. */
  private readonly released = new Set<string>();
  private slotFreed: (() => void) | undefined;
  /** Ends the loop's idle wait early (listen); `woken` remembers a wake that came while it was busy. */
  private idleEnded: (() => void) | undefined;
  /** The connection that LISTENs for enqueued jobs, while it does. */
  private listener: PoolClient | undefined;
  private woken = false;
  /**
   * How the next claim starts. `claim`: at once. `probe`: the last claim found nothing, so it first
   * asks whether any job is due, in one statement instead of a claim's transaction of three (an
   * idle queue's poll: docs/benchmarks.md, "Idle CPU"). `blocked`: a probe found jobs due that the
   * claim then could not take: their keys or groups are full, so probing would only add a
   * statement; or, rarely, another replica took them in between. At once again either way, until
   * a claim takes something (in the second case an idle queue polls as it did before the probe).
   */
  private claimStart: 'claim' | 'probe' | 'blocked' = 'claim';
  private wakeSoon: NodeJS.Timeout | undefined;
  private readonly concurrency: number;
  private readonly leaseMs: number;

  constructor(
    readonly queue: string,
    private readonly pool: Pool,
    private readonly options: WorkerOptions<P>,
  ) {
    this.name = `jobs:${queue}`;
    this.concurrency = options.concurrency ?? 20;
    this.leaseMs = options.leaseMs ?? 30_000;
  }

  /** Attempts running in this process now. */
  get running(): number {
    return this.inFlight.size;
  }

  /** Whether it LISTENs for enqueued jobs now (with `listen`; a lost connection is replaced after a few seconds). */
  get listening(): boolean {
    return this.listener !== undefined;
  }

  /**
   * Whether its claim loop waits now for a wake or its next poll, every wake before handled: a job
   * enqueued from here on is claimed at its NOTIFY (with `listen`) or at the poll.
   */
  get idle(): boolean {
    return this.idleEnded !== undefined;
  }

  /**
   * Claims and runs jobs until signal aborts; then takes no more, lets running attempts finish for
   * graceMs and releases the rest (back to queued, due now) so another replica runs them.
   */
  async run(ctx: { signal: AbortSignal; graceMs: number; beat(): void }): Promise<void> {
    const { signal } = ctx;
    const { logger, pollMs = 250, sweepEveryMs = 60_000, metricsEveryMs = 15_000 } = this.options;
    const renew = setInterval(() => void this.renewLeases(), Math.max(50, this.leaseMs / 3));
    // On a timer, not in the claim loop: that loop waits for a free slot while the queue backs up.
    // A failure (database away) is left to the loop's own warnings.
    const gaugeTimer = setInterval(() => void this.recordGauges().catch(() => undefined), metricsEveryMs);
    const stopListening = this.options.listen ? this.listen(signal) : () => Promise.resolve();
    let failures = 0;
    let lastSweep = 0;
    let lastTakeBack = 0;
    // Expired leases are looked for a few times per lease, not at every claim (each claim would pay a query).
    const takeBackEveryMs = Math.min(1_000, this.leaseMs / 4);
    try {
      while (!signal.aborted) {
        ctx.beat();
        const free = this.concurrency - this.inFlight.size;
        if (free <= 0) {
          await this.nextSlot(signal);
          continue;
        }
        let claimed: Job<P>[];
        let contended: boolean;
        try {
          if (Date.now() - lastTakeBack >= takeBackEveryMs) {
            lastTakeBack = Date.now();
            await this.takeBackExpiredLeases();
          }
          if (Date.now() - lastSweep > sweepEveryMs) {
            lastSweep = Date.now();
            await this.deleteOldFinished();
          }
          ({ claimed, contended } = await this.claim(free));
          failures = 0;
        } catch (err) {
          failures++;
          // Twice the poll interval, doubling, at most 5 s.
          const delay = backoffDelay({ firstMs: 2 * pollMs, maxMs: 5_000 }, failures);
          logger.warn(
            { err, queue: this.queue, retry_in_ms: delay },
            'could not claim jobs; retrying (is the database reachable?)',
          );
          await systemClock.sleep(delay, signal);
          continue;
        }
        for (const job of claimed) this.start(job);
        // A full batch means more may be due: claim again at once; otherwise wait a poll interval (or
        // a wake), or only a few ms when another replica's claim held a key or group this one needed
        // (its claim ends within a few ms; a poll later, that key's or group's slots would sit idle).
        if (claimed.length < free)
          await this.waitForWork(contended ? Math.min(pollMs, 2 + Math.random() * 6) : pollMs, signal);
      }
    } finally {
      await this.drain(ctx.graceMs);
      clearInterval(renew);
      clearInterval(gaugeTimer);
      clearTimeout(this.wakeSoon);
      await stopListening();
    }
  }

  /**
   * Whether this worker's attempt still holds the job's lease, locking the job's row (FOR SHARE)
   * until `tx` ends: a handler writes its results in that transaction only when it is true, so an
   * attempt whose lease was taken back (and may run elsewhere now) writes nothing, and the lease
   * cannot be taken back or released between the check and the commit.
   */
  async holdsLease(tx: Queryable, job: Job<P>): Promise<boolean> {
    const lease = this.lease(job, 1);
    const { rows } = await tx.query(preparedStatement('jobs_holds_lease', lease.sql)(lease.values));
    return rows.length === 1;
  }

  /**
   * holdsLease as a query to put in a handler's own statement (`WITH lease AS (…)`, then `WHERE
   * EXISTS (SELECT 1 FROM lease)`), its parameters numbered from `first`: a write that checks the
   * lease in the same statement needs no transaction of its own (one round trip instead of four).
   */
  lease(job: Job<P>, first: number): { sql: string; values: unknown[] } {
    return {
      sql: `SELECT 1 FROM jobs WHERE id = $${first} AND state = 'running' AND lease_owner = $${first + 1} AND attempts = $${first + 2} FOR SHARE`,
      values: [job.id, this.owner, job.attempt],
    };
  }

  /**
   * The attempt's success as a statement to put in a handler's own (`WITH job AS (…)`, parameters
   * numbered from `first`), which then resolves SUCCESS_RECORDED: the handler's writes and the
   * job's end in one round trip. It returns the job's id only while this attempt holds the lease.
   */
  succeeded(job: Job<P>, first: number): { sql: string; values: unknown[] } {
    return { sql: succeedSql(first), values: [job.id, this.owner, job.attempt] };
  }

  /** Claims again at once (a job was enqueued, or an attempt ended). */
  wake(): void {
    this.woken = true;
    if (this.claimStart === 'probe') this.claimStart = 'claim';
    this.idleEnded?.();
  }

  private waitForWork(ms: number, signal: AbortSignal): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(), ms);
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.idleEnded = undefined;
        this.woken = false;
        resolve();
      };
      this.idleEnded = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * LISTENs for enqueued jobs of this queue on a pooled connection of its own until signal aborts;
   * a lost connection is replaced after a few seconds (polling covers the gap). Returns its stop.
   */
  private listen(signal: AbortSignal): () => Promise<void> {
    let reconnect: NodeJS.Timeout | undefined;
    let stopped = false;
    const onNotification = (msg: { payload?: string | undefined }) => {
      if (msg.payload === this.queue) this.wake();
    };
    const connect = async () => {
      if (stopped || signal.aborted) return;
      let c: PoolClient | undefined;
      let released = false as boolean; // set by drop(), from the connection's error handler
      const drop = (err?: Error) => {
        if (!c || released) return;
        released = true;
        c.removeListener('notification', onNotification);
        if (this.listener === c) this.listener = undefined;
        c.release(err);
      };
      const again = () => {
        if (!stopped) reconnect = setTimeout(() => void connect(), 2_000);
      };
      try {
        c = await this.pool.connect();
        c.on('notification', onNotification);
        c.on('error', (err) => {
          this.options.logger.warn(
            { err, queue: this.queue },
            'lost the connection that listens for new jobs; polling until it is back',
          );
          drop(err);
          again();
        });
        await c.query(`LISTEN ${JOBS_CHANNEL}`);
        // Stopped while it connected: never keep the connection checked out. (TypeScript keeps the
        // narrowing of the test above across the await.)
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
        if (stopped) return drop();
        this.listener = c;
        this.wake(); // jobs enqueued before it listened
      } catch (err) {
        if (released) return; // the error handler dealt with it
        this.options.logger.warn(
          { err, queue: this.queue },
          'could not listen for new jobs; polling, and trying again',
        );
        drop(err as Error);
        again();
      }
    };
    void connect();
    return async () => {
      stopped = true;
      clearTimeout(reconnect);
      const c = this.listener;
      this.listener = undefined;
      if (!c) return;
      c.removeListener('notification', onNotification);
      // UNLISTEN before the connection goes back to the pool for other work.
      await c.query(`UNLISTEN ${JOBS_CHANNEL}`).then(
        () => c.release(),
        (err: Error) => c.release(err),
      );
    };
  }

  /** Resolves when an attempt ends, on abort, or after a second (so the loop beats while every slot is busy). */
  private nextSlot(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(), 1_000);
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.slotFreed = undefined;
        resolve();
      };
      this.slotFreed = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private start(job: Job<P>): void {
    const abort = new AbortController();
    const timeoutMs = this.options.attemptTimeoutMs ?? 300_000;
    const timer = setTimeout(() => abort.abort(new Error(`attempt timed out after ${timeoutMs} ms`)), timeoutMs);
    const done = (async () => {
      let outcome: unknown;
      let recorded = false;
      try {
        recorded =
          SUCCESS_RECORDED ===
          (await Promise.race([
            this.options.handle(job, abort.signal),
            new Promise<never>((_, reject) =>
              abort.signal.addEventListener('abort', () => reject(abort.signal.reason), { once: true }),
            ),
          ]));
      } catch (err) {
        outcome = err ?? new Error('the handler failed without an error');
      } finally {
        clearTimeout(timer);
      }
      // Recorded by the handler (or discarded there: its lease was gone), nothing is left to write.
      if (!recorded) await this.finish(job, outcome);
      else this.released.delete(job.id);
    })().finally(() => {
      this.inFlight.delete(job.id);
      this.slotFreed?.();
      // An ended attempt frees a slot here and room in its key and group: claim again. Attempts
      // ending close together share one claim (a few ms later) instead of one claim each.
      this.wakeSoon ??= setTimeout(() => {
        this.wakeSoon = undefined;
        this.wake();
      }, 3);
    });
    this.inFlight.set(job.id, { job, abort, done });
  }

  /** Records the attempt's outcome, if this worker still holds the job's lease. */
  private async finish(job: Job<P>, failure: unknown): Promise<void> {
    const { logger } = this.options;
    if (this.released.delete(job.id)) return;
    let statement: QueryConfig;
    let reason = '';
    if (failure === undefined) {
      statement = SUCCEED([job.id, this.owner, job.attempt]);
    } else {
      const permanent = failure instanceof PermanentFailure;
      const delay =
        failure instanceof RetryLater
          ? failure.delayMs
          : (this.options.retryDelayMs ?? exponentialBackoff)(job.attempt);
      const message = failure instanceof Error ? failure.message : String(failure);
      reason = message.slice(0, 2_000);
      statement = FAIL([job.id, this.owner, job.attempt, permanent, delay, reason]);
      const dead = permanent || job.attempt >= job.maxAttempts;
      logger[dead ? 'warn' : 'info'](
        {
          queue: this.queue,
          job_id: job.id,
          attempt: job.attempt,
          reason: message,
          ...(dead ? {} : { retry_in_ms: delay }),
        },
        dead ? 'job failed for good (dead)' : 'job attempt failed; will retry',
      );
    }
    const { onDead } = this.options;
    let rowCount: number | null;
    try {
      rowCount = await retry(
        async () =>
          failure !== undefined && onDead
            ? await withTransaction(this.pool, async (tx) => {
                const { rows } = await tx.query<{ state: JobState }>(statement);
                if (rows[0]?.state === 'dead') await onDead(tx, job, reason);
                return rows.length;
              })
            : (await this.pool.query(statement)).rowCount,
        { backoff: RECORD_OUTCOME_BACKOFF, attempts: 3 },
      );
    } catch (err) {
      // Unrecorded, the lease expires and the attempt runs again: at least once, never lost.
      return logger.error(
        { err, queue: this.queue, job_id: job.id },
        'could not record a job outcome; it will run again after its lease expires',
      );
    }
    if (rowCount === 0)
      logger.warn(
        { queue: this.queue, job_id: job.id, attempt: job.attempt },
        'lease lost before the attempt ended; its outcome is discarded and the job runs again',
      );
  }

  /** Starts up to `limit` due jobs; `contended` when a key's or group's lock was another replica's. */
  private async claim(limit: number): Promise<{ claimed: Job<P>[]; contended: boolean }> {
    const { maxPerKey, maxPerGroup } = this.options;
    const NO_CAP = 2 ** 31 - 1;
    const caps = { k: maxPerKey ?? NO_CAP, g: maxPerGroup ?? NO_CAP };
    const capped = maxPerKey !== undefined || maxPerGroup !== undefined;
    type Kind = 'k' | 'g';
    let contended = false;
    if (this.claimStart === 'probe' && (await this.pool.query(ANY_DUE([this.queue]))).rows.length === 0)
      return { claimed: [], contended };
    const rows = await withTransaction(this.pool, async (tx) => {
      // A capped claim reads more candidates than it has slots: some of their keys or groups may be locked by another replica's claim, or full.
      const want = capped ? limit * 4 : limit;
      const read = await tx.query<{ id: string; key: string | null; group: string | null; state: JobState }>(
        CANDIDATES([this.queue, caps.k, caps.g, want, Math.min(want, caps.g), Math.min(want, caps.k, caps.g)]),
      );
      this.claimStart = read.rows.length ? 'claim' : this.claimStart === 'claim' ? 'probe' : 'blocked';
      const candidates = read.rows.filter((c) => c.state === 'queued'); // started by another replica since the statement's snapshot
      const keys =
        maxPerKey === undefined ? [] : [...new Set(candidates.flatMap((c) => (c.key === null ? [] : [c.key])))];
      const groups =
        maxPerGroup === undefined ? [] : [...new Set(candidates.flatMap((c) => (c.group === null ? [] : [c.group])))];
      // Whoever holds a key's (or group's) lock until its commit is the only one starting that
      // key's jobs, and counts the running ones after taking it: the caps hold across replicas.
      const locked =
        keys.length || groups.length
          ? (await tx.query<{ kind: Kind; name: string }>(LOCK([this.queue, keys, groups]))).rows
          : [];
      contended = locked.length < keys.length + groups.length;
      const room = new Map(locked.map((l) => [`${l.kind}:${l.name}`, caps[l.kind]]));
      if (locked.length) {
        const counts = await tx.query<{ kind: Kind; name: string; n: number }>(
          RUNNING([
            this.queue,
            locked.filter((l) => l.kind === 'k').map((l) => l.name),
            locked.filter((l) => l.kind === 'g').map((l) => l.name),
          ]),
        );
        for (const { kind, name, n } of counts.rows) room.set(`${kind}:${name}`, caps[kind] - n);
      }
      const chosen: string[] = [];
      for (const c of candidates) {
        if (chosen.length >= limit) break;
        // A capped key or group this claim does not hold the lock of (or has no room in) is skipped.
        const slots = [
          maxPerKey !== undefined && c.key !== null ? `k:${c.key}` : undefined,
          maxPerGroup !== undefined && c.group !== null ? `g:${c.group}` : undefined,
        ].filter((x): x is string => x !== undefined);
        if (slots.some((slot) => (room.get(slot) ?? 0) <= 0)) continue;
        for (const slot of slots) room.set(slot, room.get(slot)! - 1);
        chosen.push(c.id);
      }
      if (!chosen.length) return [];
      return (await tx.query<ClaimedRow>(START([this.owner, this.leaseMs, chosen]))).rows;
    });
    return { claimed: rows.map((r) => this.jobOf(r)), contended };
  }

  private jobOf(r: ClaimedRow): Job<P> {
    return {
      id: r.id,
      queue: this.queue,
      key: r.concurrency_key,
      payload: r.payload as P,
      attempt: r.attempts,
      maxAttempts: r.max_attempts,
    };
  }

  private async recordGauges(): Promise<void> {
    const { rows } = await this.pool.query<{ waiting: number; oldest_s: number }>(BACKLOG, [this.queue]);
    const g = gauges();
    const attributes = { queue: this.queue };
    g.waiting.record(rows[0]!.waiting, attributes);
    g.oldestWait.record(rows[0]!.oldest_s, attributes);
    g.running.record(this.inFlight.size, attributes);
  }

  /** Attempts whose worker stopped renewing (crashed, stuck, cut off) go back to the queue, due now. */
  private async takeBackExpiredLeases(): Promise<void> {
    const reason = 'lease expired: the worker running the attempt stopped renewing it (crashed, stuck or cut off)';
    const { onDead } = this.options;
    // Nearly always none: one statement (jobs_leases answers it) instead of a transaction of three.
    if ((await this.pool.query(ANY_EXPIRED([this.queue]))).rows.length === 0) return;
    const rows = await withTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<ClaimedRow & { state: JobState }>(
        `UPDATE jobs SET state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
           finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
           next_attempt_at = now(), lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
           last_error = $2
         WHERE queue = $1 AND state = 'running' AND lease_expires_at < now()
         RETURNING id, state, concurrency_key, payload, attempts, max_attempts`,
        [this.queue, reason],
      );
      if (onDead) for (const r of rows) if (r.state === 'dead') await onDead(tx, this.jobOf(r), reason);
      return rows;
    });
    if (rows.length)
      this.options.logger.warn(
        { queue: this.queue, jobs: rows.map((r) => r.id) },
        'took back jobs whose lease expired; they run again',
      );
  }

  private async renewLeases(): Promise<void> {
    const ids = [...this.inFlight.keys()];
    if (!ids.length) return;
    try {
      const { rows } = await this.pool.query<{ id: string }>(RENEW([this.leaseMs, ids, this.owner]));
      const kept = new Set(rows.map((r) => r.id));
      // A lease taken back (this worker was cut off longer than the lease): the job runs elsewhere, so stop here.
      for (const id of ids)
        if (!kept.has(id)) this.inFlight.get(id)?.abort.abort(new Error('lease lost: the job was taken back'));
    } catch (err) {
      this.options.logger.warn(
        { err, queue: this.queue },
        'could not renew job leases; retrying (is the database reachable?)',
      );
    }
  }

  /**
   * Deletes finished jobs past keepSucceededMs / keepDeadMs, at most 10,000 of each state per sweep
   * (each branch reads its own partial index). The work a job was for records its own outcome
   * (onDead for a dead one); the job row is only for operators and requeue() until then.
   */
  private async deleteOldFinished(): Promise<void> {
    await this.pool.query(
      `DELETE FROM jobs WHERE id IN (
         (SELECT id FROM jobs WHERE queue = $1 AND state = 'succeeded' AND finished_at < now() - $2 * interval '1 millisecond' LIMIT 10000)
         UNION ALL
         (SELECT id FROM jobs WHERE queue = $1 AND state = 'dead' AND finished_at < now() - $3 * interval '1 millisecond' LIMIT 10000))`,
      [this.queue, this.options.keepSucceededMs ?? 86_400_000, this.options.keepDeadMs ?? 7 * 86_400_000],
    );
  }

  /** Waits up to graceMs for running attempts, then releases the rest: back to queued, due now. */
  private async drain(graceMs: number): Promise<void> {
    if (!this.inFlight.size) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([...this.inFlight.values()].map((a) => a.done)),
      new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
    ]);
    clearTimeout(timer);
    const left = [...this.inFlight.values()];
    if (!left.length) return;
    const ids = left.map((a) => a.job.id);
    for (const id of ids) this.released.add(id);
    for (const a of left) a.abort.abort(new Error('the worker is stopping; the job was released to another worker'));
    const { onRelease } = this.options;
    await withTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<ClaimedRow>(
        `UPDATE jobs SET state = 'queued', next_attempt_at = now(), lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
           last_error = 'released: the worker stopped before the attempt ended'
         WHERE id = ANY($1) AND state = 'running' AND lease_owner = $2
         RETURNING id, concurrency_key, payload, attempts, max_attempts`,
        [ids, this.owner],
      );
      if (onRelease) for (const r of rows) await onRelease(tx, this.jobOf(r));
      return rows.length;
    }).then(
      (released) =>
        this.options.logger.warn(
          { queue: this.queue, released },
          'released unfinished jobs on shutdown; another worker runs them',
        ),
      (err: unknown) =>
        this.options.logger.error(
          { err, queue: this.queue },
          'could not release unfinished jobs; they run again when their leases expire',
        ),
    );
  }
}
