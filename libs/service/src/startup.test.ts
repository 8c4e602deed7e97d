/**
 * A service never exits on a retriable error of Kafka or PostgreSQL while it starts: it waits with
 * backoff, and only past its start-up deadline exits, with one line naming the dependency. Against
 * a real broker of this file's own (halted and resumed) and the run's PostgreSQL.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { databaseUrlFor, withTransaction } from '@workauto/db';
import { KafkaTransport, TOPICS, recordEvent, startConsumer } from '@workauto/events';
import { createLogger, setLogTarget } from '@workauto/logger';
import type { Handlers } from '@workauto/grpc';
import type { ResourceJson } from '@workauto/protos';
import { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import {
  captureLogs,
  eventually,
  freePort,
  healthStatus,
  startPrivateKafka,
  testCallerKeys,
  testDatabase,
  type PrivateKafka,
  waitingAttempts,
} from '@workauto/testing';
import { startService, type RunningService } from './index.js';

if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_c, _e, done) => done() }));
const logger = createLogger('startup-test', 'info');
const FIXTURE = new URL('./fixtures/consuming-service.js', import.meta.url);

/** The fixture service (fixtures/consuming-service.ts) as its own process; its JSON log lines. */
function startProcess(env: Record<string, string>) {
  const child = spawn(process.execPath, [FIXTURE.pathname], {
    env: {
      PATH: process.env.PATH ?? '',
      CALLER_VERIFY_KEYS: testCallerKeys.verifyKeys,
      GRPC_HOST: '127.0.0.1',
      KAFKA_NAMESPACE: `s${randomBytes(4).toString('hex')}.`,
      ...env,
    },
  });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stdout += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const lines = () =>
    stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        try {
          return JSON.parse(l) as { level: string; msg: string; [k: string]: unknown };
        } catch {
          return { level: 'raw', msg: l };
        }
      });
  return { child, exited, lines, output: () => stdout };
}

/** Resolves to the exit code, or to 'running' if the process still runs after ms. */
const exitWithin = (p: ReturnType<typeof startProcess>, ms: number) =>
  Promise.race([p.exited, sleep(ms).then(() => 'running' as const)]);

describe(
  '@workauto/service: start-up against dependencies that are away',
  { skip: process.env.WORKAUTO_KAFKA === 'off' ? 'WORKAUTO_KAFKA=off' : false },
  () => {
    let kafka: PrivateKafka;
    let halted = false;
    const running: RunningService[] = [];
    const children: ReturnType<typeof startProcess>[] = [];

    before(async () => {
      kafka = await startPrivateKafka();
    });
    after(async () => {
      for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
      if (halted) await kafka.resume().catch(() => undefined);
      for (const s of running) await s.stop().catch(() => undefined);
      await kafka?.stop();
    });

    it('waits for a halted broker (its consumers and topics), and serves and consumes once it is back', async () => {
      const databaseUrl = await testDatabase('startup_kafka');
      const transport = new KafkaTransport({
        brokers: [kafka.brokers],
        clientId: 'startup-test',
        logger,
        namespace: `s${randomBytes(4).toString('hex')}.`,
      });
      const consumed: string[] = [];
      const port = await freePort();
      await kafka.halt();
      halted = true;
      const logs = captureLogs();
      let started: RunningService | undefined;
      let failed: unknown;
      const starting = startService(
        {
          name: 'startup-test',
          errorDomain: 'test.workauto',
          protoFile: 'workauto/notes_tasks/v1/notes_tasks.proto',
          grpcService: 'workauto.notes_tasks.v1.NotesTasksService',
          definition: NotesTasksServiceService,
          migrations: [],
          handlers: () => ({}) as Handlers<typeof NotesTasksServiceService>,
          consumers: async (pool, t) => [
            await startConsumer({
              transport: t,
              pool,
              logger,
              groupId: 'startup-test',
              topics: [TOPICS.audit],
              handle: async (_tx, event) => void consumed.push(event.id),
            }),
          ],
        },
        { databaseUrl, host: '127.0.0.1', port, callerVerifyKeys: testCallerKeys.verifyKeys, transport },
        logger,
      ).then(
        (s) => ((started = s), running.push(s), s),
        (err: unknown) => ((failed = err), undefined),
      );
      try {
        await eventually(
          'a log line says it waits for the broker',
          () => failed !== undefined || logs.text().includes('waiting for the event broker'),
          30_000,
        );
        assert.equal(failed, undefined, `the start failed instead of waiting: ${String(failed)}`);
        const line = logs.lines.find((l) => l.includes('waiting for the event broker'))!;
        assert.match(line, new RegExp(kafka.brokers), 'names the brokers it waits for');
        // The sentinel: it tried the broker twice more since (the start neither failed nor gave up).
        const first = waitingAttempts(logs.lines, 'event broker');
        await eventually(
          'it tries the broker again',
          () => failed !== undefined || waitingAttempts(logs.lines, 'event broker') >= first + 2,
          30_000,
        );
        assert.equal(failed, undefined, `the start failed while the broker was away: ${String(failed)}`);
        assert.equal(started, undefined, 'not serving without its broker');
      } finally {
        logs.stop();
        await kafka.resume();
        halted = false;
      }
      const svc = await starting;
      assert.ok(svc, `started once the broker was back (${String(failed)})`);
      assert.equal(await healthStatus(`127.0.0.1:${port}`, ''), 'SERVING');
      // Its consumer works: an event recorded now is relayed and consumed.
      const db = new pg.Pool({ connectionString: databaseUrl });
      const id = await withTransaction(db, (tx) =>
        recordEvent(
          tx,
          'startup-test',
          { tenantId: '0193a000-0000-7000-8000-000000000001', requestId: 'r', actor: { type: 'system', id: 'system' } },
          { type: 'note.created', resourceType: 'note', resourceId: 'n-1', data: {} as ResourceJson },
        ),
      );
      await db.end();
      await eventually('the consumer applied the event', () => consumed.includes(id), 60_000);
      await transport.close();
    });

    it('gives up at its start-up deadline while the broker stays away: exit 1 and one fatal line naming it', async () => {
      const deadPort = await freePort();
      const p = startProcess({
        DATABASE_URL: await testDatabase('startup_kafka_gone'),
        KAFKA_BROKERS: `127.0.0.1:${deadPort}`,
        STARTUP_TIMEOUT_MS: '5000',
      });
      children.push(p);
      const code = await exitWithin(p, 60_000);
      assert.equal(code, 1, p.output());
      const lines = p.lines();
      assert.ok(
        lines.some((l) => l.level === 'warn' && /waiting for the event broker/.test(l.msg)),
        `it retried first:\n${p.output()}`,
      );
      const fatal = lines.filter((l) => l.level === 'fatal');
      assert.equal(fatal.length, 1, p.output());
      assert.match(fatal[0]!.msg, /event broker/);
      assert.match(fatal[0]!.msg, new RegExp(`127\\.0\\.0\\.1:${deadPort}`), 'names the brokers');
      assert.match(fatal[0]!.msg, /check/, 'says what to check');
      assert.deepEqual(
        lines.filter((l) => l.level === 'error' || l.level === 'raw'),
        [],
        'nothing else on the way out',
      );
    });

    it('gives up at its start-up deadline while the database stays away: exit 1 and one fatal line naming it', async () => {
      const databaseUrl = await testDatabase('startup_db_gone');
      const admin = new pg.Client({ connectionString: databaseUrlFor(process.env.TEST_DATABASE_URL!, 'postgres') });
      await admin.connect();
      const name = new URL(databaseUrl).pathname.slice(1);
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      try {
        const p = startProcess({ DATABASE_URL: databaseUrl, KAFKA_BROKERS: kafka.brokers, STARTUP_TIMEOUT_MS: '4000' });
        children.push(p);
        const code = await exitWithin(p, 60_000);
        assert.equal(code, 1, `exited at its deadline, not waiting on (${String(code)}):\n${p.output()}`);
        const fatal = p.lines().filter((l) => l.level === 'fatal');
        assert.equal(fatal.length, 1, p.output());
        assert.match(fatal[0]!.msg, /database/);
        assert.match(fatal[0]!.msg, new RegExp(`/${name}`), 'names the database');
        assert.match(fatal[0]!.msg, /check DATABASE_URL/);
        assert.doesNotMatch(p.output(), /postgres:postgres@/, 'never the credentials');
      } finally {
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
        await admin.end();
      }
    });

    it('waits for a database host name that does not resolve yet (a DNS record made after the pod), then gives up naming it', async () => {
      const p = startProcess({
        DATABASE_URL: 'postgres://u:secret@workauto-db-not-yet.invalid:5432/identity',
        KAFKA_BROKERS: kafka.brokers,
        STARTUP_TIMEOUT_MS: '3000',
      });
      children.push(p);
      assert.equal(await exitWithin(p, 60_000), 1, p.output());
      const lines = p.lines();
      assert.ok(
        lines.some((l) => l.level === 'warn' && /waiting for the database/.test(l.msg)),
        `it retried first:\n${p.output()}`,
      );
      const fatal = lines.filter((l) => l.level === 'fatal');
      assert.equal(fatal.length, 1, p.output());
      assert.match(fatal[0]!.msg, /workauto-db-not-yet\.invalid:5432\/identity/);
      assert.doesNotMatch(p.output(), /secret/, 'never the password');
    });
  },
);
