/**
 * libs/jobs against pg-boss and graphile-worker, on the run's PostgreSQL, each in a database of its
 * own: what our services rely on that each library does or does not do, shown by running it, and
 * throughput. Not a test, and not part of `make bench` (docs/decisions.md, "Our own infrastructure
 * against the libraries", has the figures).
 *
 *   make build && WORKAUTO_KAFKA=off node deploy/embedded/dist/with-infra.js -- node scripts/compare-job-queues.mjs [check…]
 *
 * Checks (all by default; name some to run only those):
 *   throughput  5,000 jobs of 2 ms over 50 keys, two replicas of 50 slots: jobs/s with a cap of 4 per key and
 *               without, in turns (ROUNDS, default 3)
 *   two-caps    a cap per key (webhook endpoint: 4) and per group (tenant: 8) at once: the most in flight of each
 *   cap-race    four replicas racing for one group capped at 2: the most in flight at once
 *   backlog     one group's 150,000 queued jobs behind its cap: how long another group's job waits to start
 *   vanished    a replica is killed mid-attempt: how long until its job runs elsewhere
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPool, runMigrations } from '@workauto/db';
import { JOBS_MIGRATIONS, JobQueue } from '@workauto/jobs';
import { createLogger } from '@workauto/logger';
import { InFlight, freshDatabase, library, timed, until } from './lib-compare.mjs';

const { PgBoss } = await library('pg-boss');
const graphile = await library('graphile-worker');
const logger = createLogger('compare', 'silent');
const quietGraphile = new graphile.Logger(() => () => undefined);

// ---------------------------------------------------------------------------------------------
// The three queues behind one small interface: a replica that runs `handle` with options, and
// enqueue of jobs { key, group }. `caps` are { key, group } (undefined: none).

/** libs/jobs: one JobWorker per replica, each on a pool of its own (as separate processes). */
async function ours(url) {
  const admin = createPool(url, { max: 4, statementTimeoutMs: 600_000 });
  await runMigrations(admin, [JOBS_MIGRATIONS], { logger: { info() {}, warn() {} } });
  const queue = new JobQueue('compare');
  const stops = [];
  return {
    name: 'libs/jobs',
    url,
    enqueue: (jobs) =>
      queue.enqueueMany(
        admin,
        jobs.map((j) => ({ payload: j, options: { key: j.key ?? null, group: j.group ?? null } })),
      ),
    async replica({ slots, caps = {}, handle, leaseMs, pollMs = 20 }) {
      const pool = createPool(url, { max: 5 });
      const worker = queue.worker(pool, {
        logger,
        concurrency: slots,
        maxPerKey: caps.key,
        maxPerGroup: caps.group,
        pollMs,
        listen: true,
        ...(leaseMs ? { leaseMs } : {}),
        handle: (job) => handle(job.payload),
      });
      const controller = new AbortController();
      const running = worker.run({ signal: controller.signal, graceMs: 0, beat: () => undefined });
      stops.push(async () => {
        controller.abort();
        await running;
        await pool.end();
      });
    },
    async close() {
      await Promise.all(stops.map((s) => s()));
      await admin.end();
    },
  };
}

/**
 * pg-boss 12: one PgBoss per replica. Its throughput setting (batches of up to 50, fetched again at
 * once while they come back full, LISTEN/NOTIFY on, polls at its least, 0.5 s): with batches of one,
 * each worker waits its poll interval after every job.
 */
async function pgBoss(url, queueOptions = {}, instanceOptions = {}) {
  const bosses = [];
  const start = async (extra = {}) => {
    const boss = new PgBoss({ connectionString: url, useListenNotify: true, ...extra });
    boss.on('error', (err) => process.env.COMPARE_DEBUG && console.error(err));
    boss.on('warning', () => undefined);
    await boss.start();
    bosses.push(boss);
    return boss;
  };
  // The instance that creates the queue also supervises it (expiry, lost heartbeats).
  const admin = await start({ supervise: true, ...instanceOptions });
  await admin.createQueue('compare', { notify: true, retryLimit: 10, ...queueOptions });
  return {
    name: 'pg-boss',
    admin,
    enqueue: async (jobs) => {
      for (let i = 0; i < jobs.length; i += 10_000)
        await admin.insert(
          'compare',
          jobs
            .slice(i, i + 10_000)
            .map((j) => ({ data: j, ...(j.pgBossGroup ? { group: { id: j.pgBossGroup } } : {}) })),
        );
    },
    async replica({ slots, groupCap, handle, batch = true }) {
      const boss = await start({ supervise: false });
      await boss.work(
        'compare',
        {
          ...(batch
            ? { batchSize: Math.min(50, slots), burstWhenBatchFull: true }
            : { batchSize: 1, localConcurrency: slots }),
          // Its least; with NOTIFY on, the default backstop is 30 s, and only new jobs notify (an
          // attempt that ends does not), so a capped group's next job would wait for it.
          pollingIntervalSeconds: 0.5,
          notifyPollingIntervalSeconds: 0.5,
          ...(groupCap ? { groupConcurrency: groupCap } : {}),
        },
        (jobs) => Promise.all(jobs.map((j) => handle(j.data))),
      );
    },
    async close() {
      await Promise.all(bosses.map((b) => b.stop({ graceful: false, close: true, timeout: 1_000 })));
    },
  };
}

/** graphile-worker 0.18: one runner per replica; a named queue (queueName) runs its jobs one at a time. */
async function graphileWorker(url) {
  await graphile.runMigrations({ connectionString: url, logger: quietGraphile });
  const utils = await graphile.makeWorkerUtils({ connectionString: url, logger: quietGraphile });
  const runners = [];
  return {
    name: 'graphile-worker',
    enqueue: (jobs) =>
      utils.addJobs(
        jobs.map((j) => ({
          identifier: 'compare',
          payload: j,
          maxAttempts: 10,
          ...(j.graphileQueue ? { queueName: j.graphileQueue } : {}),
        })),
      ),
    async replica({ slots, handle }) {
      runners.push(
        await graphile.run({
          connectionString: url,
          concurrency: slots,
          noHandleSignals: true,
          pollInterval: 500,
          logger: quietGraphile,
          taskList: { compare: (payload) => handle(payload) },
        }),
      );
    },
    async close() {
      await Promise.all(runners.map((r) => r.stop()));
      await utils.release();
    },
  };
}

// ---------------------------------------------------------------------------------------------

const results = [];
const report = (check, subject, figure) => {
  results.push({ check, subject, figure });
  console.log(`${check.padEnd(11)} ${subject.padEnd(58)} ${figure}`);
};

/** In turns (A B C D E, ROUNDS times, default 3): the median and every turn's figure. */
async function throughput() {
  const total = 5_000;
  const jobs = Array.from({ length: total }, (_, i) => ({
    key: `endpoint-${i % 50}`,
    pgBossGroup: `endpoint-${i % 50}`,
  }));
  const uncapped = jobs.map(() => ({}));
  const runs = [
    ['libs/jobs, cap 4 per key', () => freshDatabase('jobs').then(ours), { caps: { key: 4 } }, jobs],
    ['libs/jobs, no cap', () => freshDatabase('jobs').then(ours), { caps: {} }, uncapped],
    ['pg-boss, cap 4 per group (group = key)', () => freshDatabase('boss').then(pgBoss), { groupCap: 4 }, jobs],
    ['pg-boss, no cap', () => freshDatabase('boss').then(pgBoss), {}, uncapped],
    [
      'graphile-worker, no cap (it has none but 1 per named queue)',
      () => freshDatabase('gw').then(graphileWorker),
      {},
      uncapped,
    ],
  ];
  const figures = new Map(runs.map(([label]) => [label, []]));
  for (let round = 0; round < Number(process.env.ROUNDS ?? 3); round++) {
    for (const [label, make, options, batch] of runs) {
      const queue = await make();
      await queue.enqueue(batch);
      let finished = 0;
      const handle = async () => {
        await sleep(2);
        finished++;
      };
      const { ms } = await timed(async () => {
        for (const _ of [1, 2]) await queue.replica({ slots: 50, handle, ...options });
        await until(`${label}: every job done`, () => finished >= total, 300_000);
      });
      await queue.close();
      figures.get(label).push(Math.round((total / ms) * 1000));
    }
  }
  for (const [label, perSecond] of figures) {
    const median = [...perSecond].sort((a, b) => a - b)[Math.floor(perSecond.length / 2)];
    report('throughput', label, `${median} jobs/s (turns: ${perSecond.join(', ')})`);
  }
}

/** One tenant, four endpoints, 40 jobs each of 100 ms: endpoint cap 4, tenant cap 8 (webhooks: 4 and 32). */
async function twoCaps() {
  const jobs = [];
  for (let e = 0; e < 4; e++) for (let i = 0; i < 40; i++) jobs.push({ key: `endpoint-${e}`, group: 'tenant-a' });
  const run = async (label, queue, enqueueAs, options) => {
    const seen = new InFlight();
    let finished = 0;
    const handle = async (job) => {
      seen.enter(`k:${job.key}`, `g:${job.group}`);
      await sleep(100);
      seen.leave(`k:${job.key}`, `g:${job.group}`);
      finished++;
    };
    await queue.enqueue(jobs.map(enqueueAs));
    for (const _ of [1, 2]) await queue.replica({ slots: 20, handle, ...options });
    await until(`${label}: every job done`, () => finished >= jobs.length, 120_000);
    await queue.close();
    report(
      'two-caps',
      label,
      `most at once: ${seen.max('k:')} per endpoint (cap 4), ${seen.max('g:')} per tenant (cap 8)`,
    );
  };
  await run('libs/jobs: key = endpoint (4), group = tenant (8)', await ours(await freshDatabase('jobs')), (j) => j, {
    caps: { key: 4, group: 8 },
  });
  await run(
    'pg-boss: group = endpoint (4); no second cap',
    await pgBoss(await freshDatabase('boss')),
    (j) => ({ ...j, pgBossGroup: j.key }),
    { groupCap: 4 },
  );
  await run(
    'pg-boss: group = tenant (8); no second cap',
    await pgBoss(await freshDatabase('boss')),
    (j) => ({ ...j, pgBossGroup: j.group }),
    { groupCap: 8 },
  );
  await run(
    'graphile-worker: queueName = endpoint (1 at a time)',
    await graphileWorker(await freshDatabase('gw')),
    (j) => ({ ...j, graphileQueue: j.key }),
    {},
  );
}

/** Four replicas, one group capped at 2, 200 jobs of 50 ms, every replica with 4 slots fetching one job at a time. */
async function capRace() {
  const jobs = Array.from({ length: 200 }, () => ({ key: 'endpoint', group: 'tenant', pgBossGroup: 'tenant' }));
  const run = async (label, queue, options) => {
    const seen = new InFlight();
    let finished = 0;
    const handle = async () => {
      seen.enter('g');
      await sleep(50);
      seen.leave('g');
      finished++;
    };
    await queue.enqueue(jobs);
    for (const _ of [1, 2, 3, 4]) await queue.replica({ slots: 4, handle, ...options });
    await until(`${label}: every job done`, () => finished >= jobs.length, 180_000);
    await queue.close();
    report('cap-race', label, `most at once: ${seen.max('g')} (cap 2)`);
  };
  await run('libs/jobs: maxPerGroup 2, four replicas', await ours(await freshDatabase('jobs')), {
    caps: { group: 2 },
    pollMs: 5,
  });
  await run('pg-boss: groupConcurrency 2, four instances', await pgBoss(await freshDatabase('boss')), {
    groupCap: 2,
    batch: false,
  });
}

/**
 * The claim itself while a tenant at its cap has 150,000 jobs queued behind it: five times, one job
 * of another tenant is enqueued and one claim is timed (it must return that job), before and after
 * the backlog. The noisy tenant's 2 jobs at its cap were claimed first and never finish.
 */
async function backlog() {
  const noisy = Array.from({ length: 150_000 }, (_, i) => ({
    key: `noisy-endpoint-${i % 3}`,
    group: 'noisy',
    pgBossGroup: 'noisy',
  }));
  const run = async (label, queue, claim) => {
    const times = async () => {
      const ms = [];
      for (let n = 0; n < 5; n++) {
        await queue.enqueue([{ n, key: `quiet-${n}`, group: `quiet-${n}`, pgBossGroup: `quiet-${n}` }]);
        const { ms: took, result } = await timed(claim);
        if (result.length !== 1 || result[0].n !== n)
          throw new Error(`${label}: the claim returned ${JSON.stringify(result)}`);
        ms.push(took.toFixed(1));
      }
      return ms.join(', ');
    };
    await queue.enqueue(noisy.slice(0, 2));
    const atCap = await claim();
    if (atCap.length !== 2) throw new Error(`${label}: the noisy tenant's first claim returned ${atCap.length}`);
    const before = await times();
    await queue.enqueue(noisy.slice(2));
    const after = await times();
    await queue.close();
    report('backlog', label, `one claim: ${before} ms; behind 150,000: ${after} ms`);
  };
  const jobs = await ours(await freshDatabase('jobs'));
  // The worker's claim (private in TypeScript): one statement round, without its poll loop around it.
  const worker = new JobQueue('compare').worker(createPool(jobs.url, { max: 2 }), {
    logger,
    concurrency: 6,
    maxPerGroup: 2,
    maxPerKey: 4,
    leaseMs: 600_000,
    handle: async () => undefined,
  });
  await run('libs/jobs (group cap 2, key cap 4)', jobs, async () => (await worker.claim(6)).map((j) => j.payload));
  const boss = await pgBoss(await freshDatabase('boss'));
  await run('pg-boss (groupConcurrency 2)', boss, async () =>
    (await boss.admin.fetch('compare', { batchSize: 6, groupConcurrency: 2 })).map((j) => j.data),
  );
}

/** A replica in a child process claims the one job, hangs, and is killed; a survivor is running beside it. */
async function vanished() {
  const run = async (label, lib, url, survivorOptions, limitMs) => {
    const child = spawn(process.execPath, [process.argv[1], '--child', lib, url], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d.toString()));
    await until(`${label}: the child claimed the job`, () => out.includes('started'), 60_000);
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    const killedAt = performance.now();
    let ranAt;
    const queue = await survivorOptions.make(url);
    await queue.replica({ slots: 1, handle: async () => void (ranAt ??= performance.now()), ...survivorOptions });
    await until(`${label}: the job ran again`, () => ranAt !== undefined, limitMs).catch(() => undefined);
    await queue.close();
    report(
      'vanished',
      label,
      ranAt === undefined
        ? `not run again within ${limitMs / 1000} s`
        : `ran again ${((ranAt - killedAt) / 1000).toFixed(1)} s after the kill`,
    );
  };
  await run(
    'libs/jobs: lease 1 s (services: 30 s)',
    'jobs',
    await freshDatabase('jobs'),
    { make: ours, leaseMs: 1_000 },
    60_000,
  );
  await run(
    'pg-boss: heartbeatSeconds 10 (its least), monitor every 60 s (default)',
    'boss',
    await freshDatabase('boss'),
    { make: (url) => pgBoss(url, { heartbeatSeconds: 10 }) },
    120_000,
  );
  await run(
    'pg-boss: heartbeatSeconds 10, supervise and monitor every 1 s',
    'boss',
    await freshDatabase('boss'),
    {
      make: (url) => pgBoss(url, { heartbeatSeconds: 10 }, { superviseIntervalSeconds: 1, monitorIntervalSeconds: 1 }),
    },
    120_000,
  );
  await run(
    'graphile-worker (no heartbeat: taken back after 4 h)',
    'gw',
    await freshDatabase('gw'),
    { make: graphileWorker },
    20_000,
  );
}

/** The child replica of `vanished`: enqueue one job, claim it, say so, hang until killed. */
async function child(lib, url) {
  const hang = async () => {
    process.stdout.write('started\n');
    return new Promise(() => undefined);
  };
  const queue =
    lib === 'jobs'
      ? await ours(url)
      : lib === 'boss'
        ? await pgBoss(url, { heartbeatSeconds: 10 })
        : await graphileWorker(url);
  await queue.enqueue([{ key: 'k' }]);
  await queue.replica({ slots: 1, handle: hang, leaseMs: 1_000 });
}

const CHECKS = { throughput, 'two-caps': twoCaps, 'cap-race': capRace, backlog, vanished };
if (process.argv[2] === '--child') {
  await child(process.argv[3], process.argv[4]);
} else {
  const chosen = process.argv.slice(2);
  for (const name of chosen.length ? chosen : Object.keys(CHECKS)) {
    if (!CHECKS[name]) throw new Error(`unknown check ${name}: one of ${Object.keys(CHECKS).join(', ')}`);
    await CHECKS[name]();
  }
  process.exit(0); // pg-boss and graphile-worker keep timers of their own after stop
}
