import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { metrics } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { createPool, runMigrations, withTransaction, type Pool } from '@workauto/db';
import { createLogger } from '@workauto/logger';
import { captureLogs, eventually, testDatabase } from '@workauto/testing';
import {
  JOBS_MIGRATIONS,
  JobQueue,
  exponentialBackoff,
  PermanentFailure,
  RetryLater,
  SUCCESS_RECORDED,
  type Job,
  type JobWorker,
  type WorkerOptions,
} from './index.js';

const logger = createLogger('jobs-test', process.env.LOG_LEVEL ?? 'silent');

const started: { stop(): Promise<void> }[] = [];
/** A worker running as a replica would: until stop(), with its grace period (stopped after the tests at the latest). */
function run<P>(worker: JobWorker<P>, graceMs = 2_000, beat: () => void = () => undefined) {
  const controller = new AbortController();
  const done = worker.run({ signal: controller.signal, graceMs, beat });
  const handle = {
    stop: async () => {
      controller.abort();
      await done;
    },
  };
  started.push(handle);
  return handle;
}

describe('exponentialBackoff', () => {
  it('waits 1 s before the second attempt, doubling up to an hour, each within ±20 %', (t) => {
    const schedule = (random: number) => {
      t.mock.method(Math, 'random', () => random);
      const waits = [1, 2, 3, 12, 13, 30].map((attempt) => exponentialBackoff(attempt));
      t.mock.restoreAll();
      return waits;
    };
    assert.deepEqual(schedule(0.5), [1_000, 2_000, 4_000, 2_048_000, 3_600_000, 3_600_000]);
    assert.deepEqual(schedule(0), [800, 1_600, 3_200, 1_638_400, 2_880_000, 2_880_000]);
    assert.deepEqual(schedule(1), [1_200, 2_400, 4_800, 2_457_600, 4_320_000, 4_320_000]);
  });
});

describe('@workauto/jobs: a leased queue on PostgreSQL', () => {
  let url: string;
  let pool: Pool;
  const pools: Pool[] = [];
  /** Each replica has its own pool, as separate processes would. */
  const replicaPool = () => {
    const p = createPool(url, { max: 5 });
    pools.push(p);
    return p;
  };
  let n = 0;
  const newQueue = <P = { i: number }>() => new JobQueue<P>(`q${++n}`);
  const states = async (queue: string) =>
    Object.fromEntries(
      (await pool.query(`SELECT state, count(*)::int AS n FROM jobs WHERE queue = $1 GROUP BY 1`, [queue])).rows.map(
        (r) => [r.state, r.n],
      ),
    );

  /** A real replica in its own process claims job `id`, hangs in it, and is killed with SIGKILL mid-attempt. */
  async function killReplicaMidAttempt(queueName: string, id: string) {
    const fixture = fileURLToPath(new URL('./fixtures/hanging-worker.js', import.meta.url));
    const child = spawn(process.execPath, [fixture, url, queueName], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const killed = once(child, 'exit');
    try {
      await eventually('the replica started the attempt', () => out.includes(`started ${id}`));
    } finally {
      child.kill('SIGKILL');
      await killed;
    }
  }

  before(async () => {
    url = await testDatabase('jobs');
    pool = createPool(url);
    await runMigrations(pool, [JOBS_MIGRATIONS]);
  });
  after(async () => {
    await Promise.all(started.map((w) => w.stop()));
    for (const p of pools) await p.end();
    await pool.end();
  });

  it('never runs one job in two workers at once, and runs each job once', async () => {
    const queue = newQueue();
    for (let i = 0; i < 300; i++) await queue.enqueue(pool, { i });
    const running = new Set<string>();
    const runs = new Map<string, number>();
    let overlaps = 0;
    const options: WorkerOptions<{ i: number }> = {
      logger,
      concurrency: 10,
      pollMs: 10,
      async handle(job) {
        if (running.has(job.id)) overlaps++;
        running.add(job.id);
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        await sleep(Math.random() * 5);
        running.delete(job.id);
      },
    };
    const replicas = [1, 2, 3, 4].map(() => run(queue.worker(replicaPool(), options)));
    await eventually('all 300 succeeded', async () => (await states(queue.name)).succeeded === 300);
    await Promise.all(replicas.map((r) => r.stop()));
    assert.equal(overlaps, 0);
    assert.equal(runs.size, 300);
    assert.deepEqual([...new Set(runs.values())], [1], 'each job ran exactly once');
  });

  it('polls an idle queue with one statement each, not a transaction, and claims a job that came due at its next poll', async () => {
    const queue = newQueue();
    const base = replicaPool();
    const count = { statements: 0, transactions: 0 };
    // The worker's pool, counted: a statement on its own (pool.query), or a transaction's connection.
    const counted = new Proxy(base, {
      get(target, prop, receiver) {
        if (prop !== 'query' && prop !== 'connect') return Reflect.get(target, prop, receiver) as unknown;
        const method = Reflect.get(target, prop, target) as (...args: unknown[]) => unknown;
        return (...args: unknown[]) => {
          count[prop === 'query' ? 'statements' : 'transactions']++;
          return method.apply(target, args);
        };
      },
    });
    const ran: number[] = [];
    const worker = run(
      queue.worker(counted, {
        logger,
        concurrency: 2,
        pollMs: 10,
        handle: async (job) => void ran.push(job.payload.i),
      }),
    );
    await eventually('30 polls of the idle queue', () => count.statements + count.transactions >= 30);
    assert.ok(
      count.transactions <= 1,
      `${count.transactions} transactions and ${count.statements} statements for an idle queue: only its first claim takes a transaction`,
    );
    await queue.enqueue(pool, { i: 1 }); // its NOTIFY unheard (listen is off): found by a poll
    await eventually('the job ran', () => ran.length === 1);
    await worker.stop();
  });

  it('with listen, starts an enqueued job at its NOTIFY and the next job of a capped key as soon as a slot frees, not at a poll', async () => {
    const queue = newQueue();
    let started = 0;
    let running = 0;
    let peak = 0;
    const worker = queue.worker(replicaPool(), {
      logger,
      pollMs: 3_600_000, // no poll comes during the test: only a wake claims a job
      listen: true,
      maxPerKey: 1,
      async handle() {
        started++;
        peak = Math.max(peak, ++running);
        await sleep(20);
        running--;
      },
    });
    run(worker);
    await eventually('the worker listens and waits, its first claims done', () => worker.listening && worker.idle);
    // One transaction, one NOTIFY: it starts the first; the key's cap of 1 leaves the others to the slots freeing.
    await queue.enqueueMany(
      pool,
      [0, 1, 2].map((i) => ({ payload: { i }, options: { key: 'one-endpoint' } })),
    );
    await eventually('all 3 ran', () => started === 3);
    assert.equal(peak, 1, 'one at a time (maxPerKey 1)');
  });

  it('enqueues many jobs in one statement, each with its key, attempts and due time', async () => {
    const queue = newQueue();
    const later = new Date(Date.now() + 60_000);
    const ids = await queue.enqueueMany(pool, [
      { payload: { i: 1 }, options: { key: 'a', maxAttempts: 3 } },
      { payload: { i: 2 } },
      { payload: { i: 3 }, options: { runAt: later } },
    ]);
    assert.equal(ids.length, 3);
    const { rows } = await pool.query(
      `SELECT id, concurrency_key, payload, max_attempts, next_attempt_at FROM jobs WHERE queue = $1`,
      [queue.name],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    assert.deepEqual(
      ids.map((id) => byId.get(id)?.payload),
      [{ i: 1 }, { i: 2 }, { i: 3 }],
    );
    assert.equal(byId.get(ids[0])!.concurrency_key, 'a');
    assert.equal(byId.get(ids[0])!.max_attempts, 3);
    assert.equal(byId.get(ids[1])!.concurrency_key, null);
    assert.equal(byId.get(ids[1])!.max_attempts, 10);
    assert.equal(byId.get(ids[2])!.next_attempt_at.getTime(), later.getTime());
    assert.deepEqual(await queue.enqueueMany(pool, []), []);
  });

  it('listens again after its LISTEN connection is killed', async () => {
    const queue = newQueue();
    let started = 0;
    const worker = queue.worker(replicaPool(), {
      logger,
      pollMs: 3_600_000, // no poll comes during the test: only a wake claims a job
      listen: true,
      async handle() {
        started++;
      },
    });
    run(worker);
    const listeners = async () =>
      (
        await pool.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`,
        )
      ).rows;
    await eventually('the worker listens', async () => worker.listening && (await listeners()).length > 0);
    for (const { pid } of await listeners()) await pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await eventually('it lost the connection', () => !worker.listening);
    await eventually(
      'it listens again and waits, the wake of the new connection done',
      () => worker.listening && worker.idle,
    );
    await queue.enqueue(pool, { i: 1 });
    await eventually('the job ran, woken by its NOTIFY', () => started === 1);
  });

  it('runs the attempt again when the replica running it dies (its lease expires)', async () => {
    const queue = newQueue<{ hang: boolean }>();
    const id = await queue.enqueue(pool, { hang: true });
    await killReplicaMidAttempt(queue.name, id);
    assert.equal((await queue.status(pool, id))?.state, 'running', 'the dead replica still holds the lease');

    const attempts: number[] = [];
    const survivor = run(
      queue.worker(replicaPool(), {
        logger,
        pollMs: 20,
        leaseMs: 500,
        handle: async (job) => void attempts.push(job.attempt),
      }),
    );
    await eventually(
      'the job ran again and succeeded',
      async () => (await queue.status(pool, id))?.state === 'succeeded',
      10_000,
    );
    await survivor.stop();
    assert.deepEqual(attempts, [2], 'the second attempt, once');
  });

  it('keeps the lease of a long attempt by renewing it', async () => {
    const queue = newQueue();
    const id = await queue.enqueue(pool, { i: 1 });
    let runs = 0;
    const options: WorkerOptions<{ i: number }> = {
      logger,
      pollMs: 20,
      leaseMs: 300,
      handle: async () => {
        runs++;
        await sleep(1_500);
      },
    };
    const a = run(queue.worker(replicaPool(), options));
    await eventually('claimed', async () => (await queue.status(pool, id))?.state === 'running');
    const b = run(queue.worker(replicaPool(), options)); // would take the job if the lease lapsed
    await eventually('succeeded', async () => (await queue.status(pool, id))?.state === 'succeeded', 5_000);
    await Promise.all([a.stop(), b.stop()]);
    assert.equal(runs, 1);
    assert.equal((await queue.status(pool, id))?.attempts, 1);
  });

  it('keeps beating while every slot is busy with a long attempt (so the service does not think it stuck)', async () => {
    const queue = newQueue();
    const id = await queue.enqueue(pool, { i: 1 });
    let beats = 0;
    const worker = queue.worker(replicaPool(), { logger, concurrency: 1, pollMs: 10, handle: () => sleep(2_500) });
    const r = run(worker, 2_000, () => beats++);
    await eventually('claimed', () => worker.running === 1);
    const before = beats;
    await eventually('succeeded', async () => (await queue.status(pool, id))?.state === 'succeeded', 5_000);
    await r.stop();
    assert.ok(beats - before >= 2, `beat ${beats - before} times during a 2.5 s attempt`);
  });

  it('runs at most maxPerKey jobs of one key at once across replicas, while other keys proceed', async () => {
    const queue = newQueue<{ endpoint: string }>();
    for (let i = 0; i < 100; i++)
      for (const endpoint of ['a', 'b']) await queue.enqueue(pool, { endpoint }, { key: endpoint });
    for (let i = 0; i < 10; i++) await queue.enqueue(pool, { endpoint: 'none' });
    const now = new Map<string, number>();
    const peak = new Map<string, number>();
    const options: WorkerOptions<{ endpoint: string }> = {
      logger,
      concurrency: 20,
      maxPerKey: 4,
      pollMs: 10,
      async handle(job) {
        const k = job.payload.endpoint;
        now.set(k, (now.get(k) ?? 0) + 1);
        peak.set(k, Math.max(peak.get(k) ?? 0, now.get(k)!));
        await sleep(5);
        now.set(k, now.get(k)! - 1);
      },
    };
    const replicas = [1, 2, 3, 4, 5, 6].map(() => run(queue.worker(replicaPool(), options)));
    await eventually('all 210 succeeded', async () => (await states(queue.name)).succeeded === 210, 30_000);
    await Promise.all(replicas.map((r) => r.stop()));
    assert.equal(peak.get('a'), 4, `a peaked at ${peak.get('a')}`);
    assert.equal(peak.get('b'), 4, `b peaked at ${peak.get('b')}`);
    assert.ok(peak.get('none')! > 4, 'jobs without a key are not capped');
  });

  it('runs at most maxPerGroup jobs of one group at once across replicas, whatever their keys, while other groups proceed', async () => {
    // A tenant (group) with many endpoints (keys) that all hang must not take every slot.
    type Delivery = { tenant: string; endpoint: string };
    const queue = newQueue<Delivery>();
    const jobs: { payload: Delivery; options: { key: string; group: string } }[] = [];
    for (let e = 0; e < 10; e++)
      for (let i = 0; i < 6; i++)
        jobs.push({ payload: { tenant: 'noisy', endpoint: `n${e}` }, options: { key: `n${e}`, group: 'noisy' } });
    for (let i = 0; i < 30; i++)
      jobs.push({ payload: { tenant: 'quiet', endpoint: 'q' }, options: { key: 'q', group: 'quiet' } });
    await queue.enqueueMany(pool, jobs);
    const now = new Map<string, number>();
    const peak = new Map<string, number>();
    const done = new Map<string, number>(); // tenant → its jobs done
    let noisyDoneWhenQuietDone = 0;
    const count = (k: string, d: number) => {
      now.set(k, (now.get(k) ?? 0) + d);
      peak.set(k, Math.max(peak.get(k) ?? 0, now.get(k)!));
    };
    const options: WorkerOptions<Delivery> = {
      logger,
      concurrency: 20,
      maxPerKey: 4,
      maxPerGroup: 6,
      pollMs: 10,
      async handle(job) {
        count(job.payload.tenant, 1);
        count(`${job.payload.tenant}/${job.payload.endpoint}`, 1);
        await sleep(job.payload.tenant === 'noisy' ? 60 : 5);
        done.set(job.payload.tenant, (done.get(job.payload.tenant) ?? 0) + 1);
        if (job.payload.tenant === 'quiet' && done.get('quiet') === 30) noisyDoneWhenQuietDone = done.get('noisy') ?? 0;
        count(job.payload.tenant, -1);
        count(`${job.payload.tenant}/${job.payload.endpoint}`, -1);
      },
    };
    const replicas = [1, 2, 3].map(() => run(queue.worker(replicaPool(), options)));
    await eventually('all 90 succeeded', async () => (await states(queue.name)).succeeded === 90, 30_000);
    await Promise.all(replicas.map((r) => r.stop()));
    assert.equal(peak.get('noisy'), 6, `the noisy tenant peaked at ${peak.get('noisy')} across its 10 endpoints`);
    assert.ok(
      [...peak].filter(([k]) => k.startsWith('noisy/')).every(([, n]) => n <= 4),
      'each endpoint still capped at 4',
    );
    // The noisy tenant's 60 jobs take ten turns of its 6 slots; the quiet one's 30 run in slots of their
    // own meanwhile, four at a time: done with a turn of the noisy tenant's jobs (6) or more still to go.
    assert.ok(
      noisyDoneWhenQuietDone <= 54,
      `the quiet tenant, enqueued last, was done while the noisy one had ${60 - noisyDoneWhenQuietDone} of 60 jobs left: it was never left without slots`,
    );
  });

  it("claims a waiting group's job while a group at its cap has older jobs on more keys than a claim looks at", async () => {
    // A tenant at its cap with due jobs on many endpoints, all older than another tenant's job: a
    // claim that did not leave the capped tenant out before choosing would fill its few candidates
    // with that tenant's jobs, start none of them (no room) and never reach the waiting one.
    const queue = newQueue<{ tenant: string }>();
    const hourAgo = new Date(Date.now() - 3_600_000);
    await queue.enqueueMany(
      pool,
      Array.from({ length: 60 }, (_, i) => ({
        payload: { tenant: 'noisy' },
        options: { key: `noisy-endpoint-${i % 20}`, group: 'noisy', runAt: hourAgo },
      })),
    );
    let noisyRunning = 0;
    let noisyPeak = 0;
    const startedQuiet: string[] = [];
    const worker = queue.worker(replicaPool(), {
      logger,
      concurrency: 4,
      maxPerGroup: 2,
      maxPerKey: 4,
      pollMs: 10,
      handle: async (job) => {
        if (job.payload.tenant === 'quiet') return void startedQuiet.push(job.id);
        noisyPeak = Math.max(noisyPeak, ++noisyRunning);
        await new Promise<void>(() => undefined); // its receivers hang
      },
    });
    run(worker, 0);
    await eventually('the noisy tenant is at its cap', async () => (await states(queue.name)).running === 2);
    const quiet = await queue.enqueue(pool, { tenant: 'quiet' }, { key: 'quiet-endpoint', group: 'quiet' });
    await eventually("the quiet tenant's job started", () => startedQuiet.includes(quiet), 5_000);
    // Its end is written after its handler returned: until then it counts as running too.
    await eventually(
      "the quiet tenant's job succeeded",
      async () => (await queue.status(pool, quiet))?.state === 'succeeded',
      5_000,
    );
    assert.equal(noisyPeak, 2, 'the noisy tenant never ran more than its cap');
    assert.equal((await states(queue.name)).running, 2);
  });

  it("claims another group's job as fast with one group's backlog of 150,000 at its cap as without (the claim never scans a capped backlog)", async () => {
    // A tenant whose receivers hang (or whose runs wait on slow tools) piles up queued jobs behind
    // its cap. A claim that filtered that backlog row by row would cost more as it grew, until it
    // outlasted the statement timeout and no job of any tenant started. Here the worker's
    // statements get 40 ms (in production 3 s, which the same scan reaches at about 3 million).
    const queue = newQueue<{ tenant: string }>();
    const seeding = createPool(url, { statementTimeoutMs: 120_000 });
    pools.push(seeding);
    await seeding.query(
      `INSERT INTO jobs (id, queue, concurrency_key, group_key, payload, max_attempts, next_attempt_at)
       SELECT gen_random_uuid(), $1, 'noisy-endpoint-' || (i % 3), 'noisy', '{"tenant": "noisy"}', 10, now() - interval '1 hour'
         FROM generate_series(1, 150000) AS i`,
      [queue.name],
    );
    await seeding.query('ANALYZE jobs');
    const workerPool = createPool(url, { statementTimeoutMs: 40 });
    pools.push(workerPool);
    const hanging = new Promise<void>(() => undefined);
    const startedQuiet: string[] = [];
    const worker = queue.worker(workerPool, {
      logger,
      concurrency: 6,
      maxPerGroup: 2,
      maxPerKey: 4,
      pollMs: 20,
      handle: async (job) => {
        if (job.payload.tenant === 'quiet') startedQuiet.push(job.id);
        else await hanging;
      },
    });
    run(worker, 0);
    await eventually('the noisy tenant is at its cap', async () => (await states(queue.name)).running === 2, 20_000);
    const quiet = await queue.enqueue(pool, { tenant: 'quiet' }, { key: 'quiet-endpoint', group: 'quiet' });
    await eventually("the quiet tenant's job started", () => startedQuiet.includes(quiet), 20_000);
  });

  it("ends a job in the handler's own statement (succeeded, SUCCESS_RECORDED), only while its attempt holds the lease", async () => {
    const queue = newQueue<{ i: number }>();
    await pool.query('CREATE TABLE IF NOT EXISTS handler_results (job_id uuid PRIMARY KEY, ended boolean NOT NULL)');
    const ids = await queue.enqueueMany(pool, [{ payload: { i: 1 } }, { payload: { i: 2 } }]);
    const worker: JobWorker<{ i: number }> = queue.worker(replicaPool(), {
      logger,
      pollMs: 10,
      handle: async (job) => {
        // Job 2 presents another attempt's number: not the lease holder, so its job is not ended.
        const end = worker.succeeded(job.payload.i === 1 ? job : { ...job, attempt: job.attempt + 1 }, 2);
        await pool.query(`WITH job AS (${end.sql}) INSERT INTO handler_results SELECT $1, EXISTS (SELECT 1 FROM job)`, [
          job.id,
          ...end.values,
        ]);
        return SUCCESS_RECORDED;
      },
    });
    const r = run(worker);
    await eventually('both handled', async () => (await pool.query('SELECT 1 FROM handler_results')).rowCount === 2);
    await r.stop();
    const ended = Object.fromEntries(
      (await pool.query('SELECT job_id, ended FROM handler_results')).rows.map((row) => [row.job_id, row.ended]),
    );
    assert.deepEqual(ended, { [ids[0]!]: true, [ids[1]!]: false });
    assert.equal((await queue.status(pool, ids[0]!))?.state, 'succeeded');
    // The worker wrote nothing after the handler: the job the statement did not end stays running
    // until its lease expires, and then runs again (at least once).
    assert.equal((await queue.status(pool, ids[1]!))?.state, 'running');
  });

  it('retries at next_attempt_at on the schedule, honours RetryLater, and gives up as dead', async () => {
    const queue = newQueue<{ kind: string }>();
    const flaky = await queue.enqueue(pool, { kind: 'flaky' }, { maxAttempts: 3 });
    const later = await queue.enqueue(pool, { kind: 'later' });
    const broken = await queue.enqueue(pool, { kind: 'broken' }, { maxAttempts: 2 });
    const gone = await queue.enqueue(pool, { kind: 'gone' });
    const times = new Map<string, number[]>();
    const worker = queue.worker(replicaPool(), {
      logger,
      pollMs: 10,
      retryDelayMs: () => 400,
      async handle(job) {
        times.set(job.payload.kind, [...(times.get(job.payload.kind) ?? []), Date.now()]);
        if (job.payload.kind === 'flaky' && job.attempt < 3) throw new Error('endpoint answered 500');
        if (job.payload.kind === 'later' && job.attempt === 1) throw new RetryLater(800);
        if (job.payload.kind === 'broken') throw new Error('always fails');
        if (job.payload.kind === 'gone') throw new PermanentFailure('endpoint deleted');
      },
    });
    const r = run(worker);
    await eventually('flaky succeeded', async () => (await queue.status(pool, flaky))?.state === 'succeeded', 10_000);
    await eventually('later succeeded', async () => (await queue.status(pool, later))?.state === 'succeeded', 10_000);
    await eventually('broken dead', async () => (await queue.status(pool, broken))?.state === 'dead', 10_000);
    await r.stop();
    const gaps = (k: string) =>
      times
        .get(k)!
        .slice(1)
        .map((t, i) => t - times.get(k)![i]!);
    assert.equal(times.get('flaky')!.length, 3);
    for (const gap of gaps('flaky')) assert.ok(gap >= 380, `flaky waited ${gap} ms between attempts`);
    assert.ok(gaps('later')[0]! >= 780, `RetryLater(800) waited ${gaps('later')[0]} ms`);
    const dead = await queue.status(pool, broken);
    assert.equal(dead?.attempts, 2);
    assert.equal(dead?.lastError, 'always fails');
    assert.equal((await queue.status(pool, gone))?.state, 'dead');
    assert.equal(times.get('gone')!.length, 1, 'a permanent failure is not retried');
    assert.equal(await queue.requeue(pool, gone), true);
    assert.equal((await queue.status(pool, gone))?.state, 'queued');
  });

  /**
   * Makes the database refuse (raise) the first `times` updates of queue's jobs that `when` matches
   * (a trigger; its count is a sequence, which a refused write does not roll back). Returns how
   * many it was asked, and its removal.
   */
  async function refuseUpdates(queue: string, when: string, times: number) {
    const name = `refuse_${queue}`;
    await pool.query(`CREATE SEQUENCE ${name}`);
    await pool.query(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('${name}') <= ${times} THEN RAISE EXCEPTION 'the database refused the write (a test)'; END IF;
        RETURN NEW;
      END $$`);
    await pool.query(
      `CREATE TRIGGER ${name} BEFORE UPDATE ON jobs FOR EACH ROW WHEN (NEW.queue = '${queue}' AND ${when}) EXECUTE FUNCTION ${name}()`,
    );
    return {
      asked: async () => Number((await pool.query<{ n: string }>(`SELECT last_value AS n FROM ${name}`)).rows[0]!.n),
      remove: () => pool.query(`DROP TRIGGER ${name} ON jobs; DROP FUNCTION ${name}(); DROP SEQUENCE ${name}`),
    };
  }

  it('records an outcome the database refused twice at its third try (500 ms, then 1 s later): the job ran once', async () => {
    const queue = newQueue();
    const refused = await refuseUpdates(queue.name, "NEW.state = 'succeeded'", 2);
    try {
      const id = await queue.enqueue(pool, { i: 1 });
      let runs = 0;
      run(
        queue.worker(replicaPool(), {
          logger,
          pollMs: 10,
          async handle() {
            runs++;
          },
        }),
      );
      // Unrecorded, the job would stay running until its lease expires (30 s) and then run again.
      await eventually('the job succeeded', async () => (await queue.status(pool, id))?.state === 'succeeded');
      assert.equal(runs, 1, 'recorded, not run again');
      assert.equal(await refused.asked(), 3, 'recorded at the third try');
    } finally {
      await refused.remove();
    }
  });

  it('claims again after a claim failed, waiting twice the poll interval, doubling', async () => {
    const queue = newQueue();
    const refused = await refuseUpdates(queue.name, "OLD.state = 'queued' AND NEW.state = 'running'", 3);
    const logs = captureLogs();
    try {
      const id = await queue.enqueue(pool, { i: 1 });
      run(
        queue.worker(replicaPool(), {
          logger: createLogger('jobs-claims', 'warn'),
          pollMs: 50,
          handle: async () => undefined,
        }),
      );
      await eventually('the job succeeded', async () => (await queue.status(pool, id))?.state === 'succeeded');
      assert.equal(await refused.asked(), 4);
      const waits = logs.lines
        .flatMap((chunk) => chunk.split('\n').filter(Boolean))
        .map((l) => JSON.parse(l) as { msg: string; queue?: string; retry_in_ms?: number })
        .filter((l) => l.queue === queue.name && l.msg.startsWith('could not claim jobs'))
        .map((l) => l.retry_in_ms);
      assert.deepEqual(waits, [100, 200, 400]);
    } finally {
      logs.stop();
      await refused.remove();
    }
  });

  it('tells the work it ends, in the same transaction, when a job dies: a last attempt that failed, or one whose replica died', async () => {
    await pool.query(`CREATE TABLE IF NOT EXISTS dead_jobs (job_id text PRIMARY KEY, reason text NOT NULL)`);
    const queue = newQueue<{ hang: boolean }>();
    const onDead: WorkerOptions<{ hang: boolean }>['onDead'] = async (tx, job, reason) => {
      await tx.query(`INSERT INTO dead_jobs (job_id, reason) VALUES ($1, $2)`, [job.id, reason]);
    };
    const deadReason = async (id: string) =>
      (await pool.query(`SELECT reason FROM dead_jobs WHERE job_id = $1`, [id])).rows[0]?.reason as string | undefined;

    // The last attempt fails.
    const failing = await queue.enqueue(pool, { hang: false }, { maxAttempts: 1 });
    const r = run(
      queue.worker(replicaPool(), {
        logger,
        pollMs: 10,
        onDead,
        handle: async () => {
          throw new Error('receiver answered 500');
        },
      }),
    );
    await eventually(
      'the failing job is dead',
      async () => (await queue.status(pool, failing))?.state === 'dead',
      10_000,
    );
    await r.stop();
    assert.equal(await deadReason(failing), 'receiver answered 500');

    // The replica running the last attempt dies: the job is never handled again, and the work hears of it.
    const lost = await queue.enqueue(pool, { hang: true }, { maxAttempts: 1 });
    await killReplicaMidAttempt(queue.name, lost);
    const handled: string[] = [];
    const survivor = run(
      queue.worker(replicaPool(), {
        logger,
        pollMs: 20,
        leaseMs: 500,
        onDead,
        handle: async (job) => void handled.push(job.id),
      }),
    );
    await eventually('the lost job is dead', async () => (await queue.status(pool, lost))?.state === 'dead', 15_000);
    await eventually('the work heard of it', async () => (await deadReason(lost)) !== undefined);
    await survivor.stop();
    assert.deepEqual(handled, [], 'a job past its attempts is not run again');
    assert.match((await deadReason(lost))!, /lease expired/);
  });

  it('deletes dead and succeeded jobs once they are older than keepDeadMs / keepSucceededMs, and keeps the rest', async () => {
    const queue = newQueue<{ kind: string }>();
    const ids = {
      oldDead: await queue.enqueue(pool, { kind: 'die' }, { maxAttempts: 1 }),
      recentDead: await queue.enqueue(pool, { kind: 'die' }, { maxAttempts: 1 }),
      oldSucceeded: await queue.enqueue(pool, { kind: 'ok' }),
      recentSucceeded: await queue.enqueue(pool, { kind: 'ok' }),
      running: await queue.enqueue(pool, { kind: 'hang' }),
    };
    const handle: WorkerOptions<{ kind: string }>['handle'] = async (job, signal) => {
      if (job.payload.kind === 'die') throw new PermanentFailure('the receiver is gone');
      if (job.payload.kind === 'hang') await sleep(60_000, undefined, { signal });
    };
    const first = run(queue.worker(replicaPool(), { logger, pollMs: 10, handle }), 0);
    await eventually('two dead, two succeeded, one running', async () => {
      const s = await states(queue.name);
      return s.dead === 2 && s.succeeded === 2 && s.running === 1;
    });
    await first.stop(); // releases the hanging one: queued again
    const queued = await queue.enqueue(pool, { kind: 'ok' }, { runAt: new Date(Date.now() + 3_600_000) });
    // Finished two hours ago (a dead job can be requeued until keepDeadMs has passed: this one no longer can).
    await pool.query(`UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = ANY($1)`, [
      [ids.oldDead, ids.oldSucceeded],
    ]);

    const hour = 3_600_000;
    const second = run(
      queue.worker(replicaPool(), {
        logger,
        pollMs: 10,
        keepDeadMs: hour,
        keepSucceededMs: hour,
        sweepEveryMs: 50,
        handle,
      }),
      0,
    );
    await eventually(
      'the old ones are deleted',
      async () =>
        (await queue.status(pool, ids.oldDead)) === undefined &&
        (await queue.status(pool, ids.oldSucceeded)) === undefined,
      5_000,
    );
    await eventually(
      'the released one runs again',
      async () => (await queue.status(pool, ids.running))?.state === 'running',
    );
    // The sentinel: a sweep that started after this (it deletes a job finished two hours ago) has
    // passed over the recent ones too.
    const sentinel = randomUUID();
    await pool.query(
      `INSERT INTO jobs (id, queue, payload, state, max_attempts, finished_at)
       VALUES ($1, $2, '{"kind": "ok"}', 'succeeded', 1, now() - interval '2 hours')`,
      [sentinel, queue.name],
    );
    await eventually(
      'a later sweep deleted the sentinel',
      async () => (await queue.status(pool, sentinel)) === undefined,
    );
    await second.stop();
    assert.equal(
      (await queue.status(pool, ids.recentDead))?.state,
      'dead',
      'a recent dead job is kept (it can still be requeued)',
    );
    assert.equal((await queue.status(pool, ids.recentSucceeded))?.state, 'succeeded');
    assert.equal((await queue.status(pool, queued))?.state, 'queued');
    assert.notEqual(await queue.status(pool, ids.running), undefined, 'a running job is kept');
    assert.equal(await queue.requeue(pool, ids.oldDead), false, 'a deleted dead job cannot be requeued');
    assert.equal(await queue.requeue(pool, ids.recentDead), true);
  });

  it('reports how many due jobs wait, how long the oldest has waited, and how many run here (a queue backing up)', async () => {
    const reader = new (class extends MetricReader {
      protected async onForceFlush() {}
      protected async onShutdown() {}
    })();
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
    const queue = newQueue();
    const release = Promise.withResolvers<void>();
    for (let i = 0; i < 5; i++) await queue.enqueue(pool, { i });
    await pool.query(`UPDATE jobs SET next_attempt_at = now() - interval '90 seconds' WHERE queue = $1`, [queue.name]);
    const worker = run(
      queue.worker(replicaPool(), { logger, concurrency: 2, metricsEveryMs: 50, handle: () => release.promise }),
    );
    const gauge = async (name: string) => {
      const { resourceMetrics } = await reader.collect();
      const m = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((x) => x.descriptor.name === name);
      const point = m?.dataPoints.find((p) => p.attributes.queue === queue.name);
      return point?.value as number | undefined;
    };
    try {
      await eventually('2 run and 3 wait', async () => (await gauge('workauto.jobs.waiting')) === 3);
      assert.equal(await gauge('workauto.jobs.running'), 2);
      assert.ok((await gauge('workauto.jobs.oldest_wait'))! >= 90, 'the oldest due job has waited 90 s');
    } finally {
      release.resolve();
      await worker.stop();
      metrics.disable();
    }
  });

  it('stops gracefully: lets a short attempt finish, releases one that outlasts the grace period', async () => {
    const queue = newQueue<{ kind: 'short' | 'long' }>();
    const short = await queue.enqueue(pool, { kind: 'short' });
    const long = await queue.enqueue(pool, { kind: 'long' });
    // The short attempt ends when the test lets it (once the stop began); the long one only when aborted.
    const shortEnds = Promise.withResolvers<void>();
    const worker = queue.worker(replicaPool(), {
      logger,
      pollMs: 10,
      handle: (job, signal) =>
        job.payload.kind === 'short'
          ? shortEnds.promise
          : new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error))),
    });
    const r = run(worker, 3_000);
    await eventually('both running', () => worker.running === 2);
    let stopped = false;
    const stopping = r.stop().then(() => (stopped = true));
    shortEnds.resolve();
    await eventually(
      'the short attempt finished while the worker stops',
      async () => (await queue.status(pool, short))?.state === 'succeeded',
    );
    assert.equal(stopped, false, 'the stop waits out the grace period for the long attempt');
    assert.equal((await queue.status(pool, long))?.state, 'running', 'not released before the grace period ends');
    await stopping; // a stop that waited for the long attempt itself would never end
    const released = await queue.status(pool, long);
    assert.equal(released?.state, 'queued', 'released for another worker');
    assert.equal(released?.leaseOwner, null);
    // Another worker takes it at once.
    let ranAgain = false;
    const next = run(queue.worker(replicaPool(), { logger, pollMs: 10, handle: async () => void (ranAgain = true) }));
    await eventually('run by another worker', async () => (await queue.status(pool, long))?.state === 'succeeded');
    await next.stop();
    assert.ok(ranAgain);
  });

  it('fences an attempt by its lease, tells the work of a release on shutdown, and says which keys have a job waiting', async () => {
    await pool.query(`CREATE TABLE IF NOT EXISTS released_jobs (job_id text PRIMARY KEY)`);
    const queue = newQueue<{ ms: number }>();
    const long = await queue.enqueue(pool, { ms: 60_000 }, { key: 'a' });
    await queue.enqueue(pool, { ms: 0 }, { key: 'b', runAt: new Date(Date.now() + 3_600_000) });
    assert.deepEqual(await queue.queuedKeys(pool, ['a', 'b', 'c']), new Set(['a', 'b']));
    let attempt: Job<{ ms: number }> | undefined;
    const worker = queue.worker(replicaPool(), {
      logger,
      pollMs: 10,
      handle: (job, signal) => {
        attempt = job;
        return sleep(job.payload.ms, undefined, { signal });
      },
      onRelease: async (tx, job) => void (await tx.query(`INSERT INTO released_jobs VALUES ($1)`, [job.id])),
    });
    const r = run(worker, 100);
    await eventually('the long job runs', () => worker.running === 1);
    assert.deepEqual(await queue.queuedKeys(pool, ['a', 'b']), new Set(['b']), 'a running job does not wait');
    const holds = (job: Job<{ ms: number }>) => withTransaction(pool, (tx) => worker.holdsLease(tx, job));
    assert.equal(await holds(attempt!), true);
    assert.equal(await holds({ ...attempt!, attempt: attempt!.attempt + 1 }), false, 'another attempt of the job');
    await r.stop();
    assert.deepEqual((await pool.query(`SELECT job_id FROM released_jobs`)).rows, [{ job_id: long }]);
    assert.equal((await queue.status(pool, long))?.state, 'queued');
    assert.equal(await holds(attempt!), false, 'a released attempt holds nothing');
  });

  it('runs 5,000 jobs over 50 keys capped at 4 on two replicas: each once, never more than 4 of a key at once', async (t) => {
    // How fast is a `make bench` figure, not a bound here: webhook deliveries per second run on this
    // queue (scripts/bench-webhooks.mjs), and scripts/compare-job-queues.mjs runs this very load.
    const queue = newQueue<{ endpoint: number }>();
    const total = 5_000;
    await pool.query(
      `INSERT INTO jobs (id, queue, concurrency_key, payload, max_attempts)
       SELECT gen_random_uuid(), $1, 'endpoint-' || (i % 50), jsonb_build_object('endpoint', i % 50), 10 FROM generate_series(1, $2) AS i`,
      [queue.name, total],
    );
    let done = 0;
    const running = new Map<number, number>();
    let peak = 0;
    const options: WorkerOptions<{ endpoint: number }> = {
      logger,
      concurrency: 50,
      maxPerKey: 4,
      pollMs: 10,
      handle: async ({ payload: { endpoint } }) => {
        running.set(endpoint, (running.get(endpoint) ?? 0) + 1);
        peak = Math.max(peak, running.get(endpoint)!);
        await sleep(2);
        running.set(endpoint, running.get(endpoint)! - 1);
        done++;
      },
    };
    const started = performance.now();
    const replicas = [1, 2].map(() => run(queue.worker(replicaPool(), options)));
    await eventually('all done', async () => (await states(queue.name)).succeeded === total, 60_000);
    t.diagnostic(`${total} jobs in ${Math.round(performance.now() - started)} ms`);
    await Promise.all(replicas.map((r) => r.stop()));
    assert.equal(done, total, 'each job ran once');
    assert.ok(peak <= 4, `at most 4 of a key at once, not ${peak}`);
  });
});
