import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { TenantShareBusyError, databaseUrlFor } from '@workauto/db';
import { createLogger, setLogTarget } from '@workauto/logger';
import { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import {
  TestClient,
  captureLogs,
  eventually,
  freePort,
  healthStatus,
  newTenant,
  testCallerKeys,
  testDatabase,
  waitingAttempts,
} from '@workauto/testing';
import type { Handlers } from '@workauto/grpc';
import { JOBS_MIGRATIONS, JobQueue } from '@workauto/jobs';
import {
  HEALTH,
  startService,
  type RunningService,
  type ServiceConfig,
  type ServiceSpec,
  type Worker,
  type WorkerDeps,
} from './index.js';

if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_c, _e, done) => done() }));
const logger = createLogger('service-test', 'info');

const GRPC_SERVICE = 'workauto.notes_tasks.v1.NotesTasksService';
const migrations = mkdtempSync(join(tmpdir(), 'service-test-migrations-'));
writeFileSync(join(migrations, '0001_things.sql'), 'CREATE TABLE things (id int PRIMARY KEY);');

/** A service with the shared start-up and no handlers of its own (none are called here). */
function spec(
  extra: Partial<ServiceSpec<typeof NotesTasksServiceService>> = {},
): ServiceSpec<typeof NotesTasksServiceService> {
  return {
    name: 'kit-test',
    errorDomain: 'test.workauto',
    protoFile: 'workauto/notes_tasks/v1/notes_tasks.proto',
    grpcService: GRPC_SERVICE,
    definition: NotesTasksServiceService,
    migrations,
    handlers: () => ({}) as Handlers<typeof NotesTasksServiceService>,
    ...extra,
  };
}

/** The gRPC health status of `name` on loopback. */
const health = (port: number, name: string) => healthStatus(`127.0.0.1:${port}`, name);

describe('@workauto/service: the start-up every service shares', () => {
  let admin: pg.Client;
  const running: RunningService[] = [];
  const start = async (
    s: ServiceSpec<typeof NotesTasksServiceService>,
    config: Partial<ServiceConfig> & { databaseUrl: string },
  ) => {
    const svc = await startService(
      s,
      { host: '127.0.0.1', port: 0, healthCheckMs: 100, callerVerifyKeys: testCallerKeys.verifyKeys, ...config },
      logger,
    );
    running.push(svc);
    return svc;
  };
  const allowConnections = async (databaseUrl: string, allow: boolean) => {
    const name = new URL(databaseUrl).pathname.slice(1);
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS ${allow}`);
    if (!allow) await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
  };
  const connectionsOf = async (applicationName: string) =>
    (
      await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [
        applicationName,
      ])
    ).rows[0].n as number;

  before(async () => {
    admin = new pg.Client({ connectionString: databaseUrlFor(process.env.TEST_DATABASE_URL!, 'postgres') });
    await admin.connect();
  });
  after(async () => {
    for (const s of running) await s.stop().catch(() => undefined);
    await admin.end();
  });

  it('reports liveness and readiness; readiness follows the database while liveness stays SERVING', async () => {
    const databaseUrl = await testDatabase('svc_health');
    const svc = await start(spec(), { databaseUrl });
    assert.equal(await health(svc.port, HEALTH.liveness), 'SERVING');
    assert.equal(await health(svc.port, HEALTH.readiness), 'SERVING');
    assert.equal(await health(svc.port, GRPC_SERVICE), 'SERVING');
    await allowConnections(databaseUrl, false);
    try {
      await eventually('readiness NOT_SERVING', async () => (await health(svc.port, '')) === 'NOT_SERVING');
      assert.equal(await health(svc.port, GRPC_SERVICE), 'NOT_SERVING');
      assert.equal(
        await health(svc.port, HEALTH.liveness),
        'SERVING',
        'a database outage must not restart the process',
      );
    } finally {
      await allowConnections(databaseUrl, true);
    }
    await eventually('readiness SERVING again', async () => (await health(svc.port, '')) === 'SERVING');
    await svc.stop();
  });

  it('survives a checked-out connection breaking while idle (a transaction awaiting Kafka during an outage)', async () => {
    const databaseUrl = await testDatabase('svc_broken_client');
    let held: pg.PoolClient | undefined;
    const holder: Worker = {
      name: 'holder',
      async run({ signal, beat }) {
        const client = await deps.pool.connect();
        held = client;
        await client.query('SELECT 1');
        while (!signal.aborted) {
          beat();
          await sleep(20);
        }
      },
    };
    let deps!: WorkerDeps;
    const svc = await start(spec({ workers: (d) => ((deps = d), [holder]) }), { databaseUrl });
    await eventually('a connection is held', () => held !== undefined);
    // Without a listener, the terminated connection's 'error' event would crash this test process.
    // (Not events.once: it would reject on the 'error' event this test expects.)
    const ended = new Promise((resolve) => held!.once('end', resolve));
    await allowConnections(databaseUrl, false);
    await allowConnections(databaseUrl, true);
    await ended; // the client saw its connection go, and the process is still here
    held!.release();
    await eventually('serving again', async () => (await health(svc.port, '')) === 'SERVING');
    await svc.stop();
  });

  it('waits for an unreachable database at start, saying what it waits for, and serves once it answers', async () => {
    const databaseUrl = await testDatabase('svc_wait');
    await allowConnections(databaseUrl, false);
    const logs = captureLogs();
    let started: RunningService | undefined;
    const starting = start(spec(), { databaseUrl }).then((s) => (started = s));
    try {
      // A third attempt's line: it retried, and is still waiting rather than failed.
      await eventually('a log line says it waits again', () => waitingAttempts(logs.lines, 'database') >= 3, 10_000);
      assert.equal(started, undefined, 'still waiting, not failed');
      const line = logs.lines.find((l) => l.includes('waiting for the database'))!;
      assert.match(line, new RegExp(new URL(databaseUrl).pathname.slice(1)), 'names the database');
      assert.doesNotMatch(line, /postgres:postgres@/, 'never the credentials');
    } finally {
      await allowConnections(databaseUrl, true);
      logs.stop();
    }
    const svc = await starting;
    assert.equal(await health(svc.port, ''), 'SERVING');
    await svc.stop();
  });

  it("logs a database that is away and a busy tenant share at warn with their reason (503s, its tenant's 429), never as unexpected errors", async () => {
    const databaseUrl = await testDatabase('svc_conditions');
    const failures = [
      Object.assign(new Error('Connection terminated unexpectedly'), { code: undefined }),
      new TenantShareBusyError(5),
      Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
    ];
    let next = 0;
    const svc = await start(
      spec({
        handlers: () =>
          ({
            listNotes: async () => {
              throw failures[next++]!;
            },
          }) as unknown as Handlers<typeof NotesTasksServiceService>,
      }),
      { databaseUrl },
    );
    const client = new TestClient('notes_tasks', `127.0.0.1:${svc.port}`);
    const logs = captureLogs();
    try {
      for (let i = 0; i < failures.length; i++)
        await assert.rejects(client.call(NotesTasksServiceService.listNotes, {}, newTenant().call));
      const lines = logs.lines.map(
        (l) => JSON.parse(l) as { level: string; msg: string; reason?: string; cause?: string },
      );
      const failed = lines.filter((l) => l.msg.startsWith('rpc failed'));
      assert.equal(failed.length, 3, logs.text());
      assert.deepEqual(
        failed.map((l) => [l.level, l.reason]),
        [
          ['warn', 'DATABASE_UNAVAILABLE'],
          ['warn', 'TENANT_DATABASE_BUSY'],
          ['warn', 'DATABASE_TIMEOUT'],
        ],
      );
      assert.match(failed[1]!.cause!, /TenantShareBusyError/, 'the cause says which condition it was');
      assert.ok(!logs.text().includes('unexpected error'));
    } finally {
      logs.stop();
      client.close();
      await svc.stop();
    }
  });

  it('starts workers once serving and stops them before the server and the pool', async () => {
    const databaseUrl = await testDatabase('svc_order');
    const events: string[] = [];
    const port = await freePort();
    const worker: Worker = {
      name: 'recorder',
      async run({ signal, beat }) {
        events.push(`started, readiness ${await health(port, '')}`);
        while (!signal.aborted) {
          beat();
          await sleep(20);
        }
        // In-flight work finishing after the signal still has the database and the server.
        await sleep(200);
        events.push(`finishing, readiness ${await health(port, '')}`);
        events.push(`database answers ${(await deps.pool.query('SELECT 1 AS ok')).rows[0].ok}`);
      },
    };
    let deps!: WorkerDeps;
    const svc = await start(spec({ workers: (d) => ((deps = d), [worker]) }), { databaseUrl, port });
    await eventually('worker started', () => events.length > 0);
    await svc.stop();
    assert.deepEqual(events, ['started, readiness SERVING', 'finishing, readiness SERVING', 'database answers 1']);
    assert.equal(deps.pool.ending, true, 'the pool closed after the workers');
    assert.match(await health(port, ''), /^error/, 'the server is closed');
  });

  it('runs a job queue worker as a service worker: a job running at shutdown finishes and is recorded before the pool closes', async () => {
    const databaseUrl = await testDatabase('svc_jobs');
    const queue = new JobQueue<{ ms: number }>('kit-test');
    let deps!: WorkerDeps;
    const svc = await start(
      spec({
        migrations: [migrations, JOBS_MIGRATIONS],
        workers: (d) => (
          (deps = d),
          [queue.worker(d.pool, { logger: d.logger, pollMs: 10, handle: (job) => sleep(job.payload.ms) })]
        ),
      }),
      { databaseUrl, workerGraceMs: 2_000 },
    );
    const id = await queue.enqueue(deps.pool, { ms: 500 });
    await eventually('running', async () => (await queue.status(deps.pool, id))?.state === 'running');
    await svc.stop();
    const check = new pg.Client({ connectionString: databaseUrl });
    await check.connect();
    try {
      assert.equal((await queue.status(check, id))?.state, 'succeeded');
    } finally {
      await check.end();
    }
  });

  it('closes what it opened when the start fails half-way', async () => {
    const databaseUrl = await testDatabase('svc_fail');
    const port = await freePort();
    const failing = spec({
      name: 'kit-test-failing',
      // Built last: by then the pool, the relay and the listening server are open.
      workers: () => {
        throw new Error('a worker could not be built');
      },
    });
    await assert.rejects(start(failing, { databaseUrl, port }), /a worker could not be built/);
    await eventually(
      'no database connection left open',
      async () => (await connectionsOf('kit-test-failing')) === 0,
      5_000,
    );
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.on('connect', () => (socket.destroy(), resolve(false)));
      socket.on('error', () => resolve(true));
    });
    assert.ok(refused, 'the gRPC port is closed again');
  });

  it("leaves other tenants database connections while one tenant's requests hold their share (half the pool)", async () => {
    // Every call sleeps in the database for as long as its request says: tenant A's ten slow calls
    // would hold the pool's ten connections, and B's quick call would wait for one of them to end.
    const databaseUrl = await testDatabase('svc_tenant_share');
    let deps!: { pool: WorkerDeps['pool'] };
    const svc = await start(
      spec({
        handlers: (pool) => {
          deps = { pool };
          return {
            listNotes: async (req: { q?: string }) => {
              await pool.query('SELECT pg_sleep($1)', [Number(req.q ?? 0)]);
              return { data: [], has_more: false };
            },
          } as unknown as Handlers<typeof NotesTasksServiceService>;
        },
      }),
      { databaseUrl },
    );
    const client = new TestClient('kit', `127.0.0.1:${svc.port}`, { deadlineMs: 20_000 });
    try {
      const a = newTenant();
      const b = newTenant();
      const finished: string[] = [];
      const slow = Array.from({ length: 10 }, (_, i) =>
        client.call(NotesTasksServiceService.listNotes, { q: '1.5' }, a.call).then(() => finished.push(`A${i}`)),
      );
      await eventually(
        "A's calls hold their connections",
        async () =>
          (
            await deps.pool.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND state = 'active'",
            )
          ).rows[0]!.n >= 5,
      );
      await client.call(NotesTasksServiceService.listNotes, { q: '0' }, b.call);
      finished.push('B');
      await Promise.all(slow);
      assert.equal(finished[0], 'B', `B's call ended first, not after A's: ${finished.join(' ')}`);
    } finally {
      client.close();
      await svc.stop();
    }
  });

  it('restarts a crashed worker loop, and turns liveness NOT_SERVING while a loop is stuck', async () => {
    const databaseUrl = await testDatabase('svc_workers');
    let crashes = 0;
    let runs = 0;
    let stall = false;
    const crashing: Worker = {
      name: 'crashing',
      async run({ signal, beat }) {
        runs++;
        if (crashes++ === 0) throw new Error('first run fails');
        while (!signal.aborted) {
          beat();
          await sleep(20);
        }
      },
    };
    const stalling: Worker = {
      name: 'stalling',
      async run({ signal, beat }) {
        while (!signal.aborted) {
          if (!stall) beat();
          await sleep(20);
        }
      },
    };
    const svc = await start(spec({ workers: () => [crashing, stalling] }), { databaseUrl, workerStuckAfterMs: 300 });
    await eventually('the crashed loop ran again', () => runs === 2, 5_000);
    assert.equal(await health(svc.port, HEALTH.liveness), 'SERVING');
    stall = true;
    await eventually(
      'liveness NOT_SERVING while stuck',
      async () => (await health(svc.port, HEALTH.liveness)) === 'NOT_SERVING',
      5_000,
    );
    assert.equal(await health(svc.port, ''), 'SERVING', 'readiness is about the database');
    stall = false;
    await eventually(
      'liveness SERVING once it beats again',
      async () => (await health(svc.port, HEALTH.liveness)) === 'SERVING',
      5_000,
    );
    await svc.stop();
  });
});

describe('@workauto/service: migrations at start', () => {
  const config = (databaseUrl: string, extra: Partial<ServiceConfig>): ServiceConfig => ({
    databaseUrl,
    host: '127.0.0.1',
    port: 0,
    callerVerifyKeys: testCallerKeys.verifyKeys,
    ...extra,
  });

  it('with migrateOnStart false applies nothing and fails naming the missing migrations (main.ts waits for them first)', async () => {
    const databaseUrl = await testDatabase('svc_no_migrate');
    await assert.rejects(
      startService(spec(), config(databaseUrl, { migrateOnStart: false }), logger),
      /MIGRATE_ON_START=false and migrations 0000_outbox, .*0001_things are not applied: run the migrate command first/,
    );
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      assert.equal((await db.query("SELECT to_regclass('things') AS t")).rows[0].t, null);
    } finally {
      await db.end();
    }
  });

  it("refuses to start when main.ts declares other migration folders than its ServiceSpec's (the migrate command would miss some)", async () => {
    const databaseUrl = await testDatabase('svc_declared');
    await assert.rejects(
      startService(spec(), config(databaseUrl, { declaredMigrations: [migrations] }), logger),
      /main\.ts declares the migrations .* but kit-test applies .*: list the same folders in runService's migrations/,
    );
  });
});
