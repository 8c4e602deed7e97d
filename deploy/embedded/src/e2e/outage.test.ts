/**
 * Database outages in the deployment shape (each service's main.js in its own process): the
 * database of one service goes away for 90 s, or is not there yet when the service starts. No
 * process exits, liveness stays SERVING (so Kubernetes restarts nothing), the other services' routes
 * keep answering through the gateway, and the service recovers on its own. Asserts on routes, not
 * on the gateway's /readyz. OUTAGE_TEST_MS shortens the outage while working on this file.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Keyring, generateToken } from '@workauto/crypto';
import { ensureDatabase } from '@workauto/db';
import { generateCallerKeys } from '@workauto/grpc';
import {
  eventually,
  freePort,
  healthStatus,
  startEmbeddedPostgres,
  waitingAttempts,
  type EmbeddedPostgresHandle,
} from '@workauto/testing';
import { startServiceProcesses, type ServiceProcesses } from '../processes.js';

const OUTAGE_MS = Number(process.env.OUTAGE_TEST_MS ?? 90_000);

/** A PostgreSQL server of notes-tasks' own, which the test stops and starts again on the same port and data. */
class NotesDatabaseServer {
  private readonly dir = mkdtempSync(join(tmpdir(), 'workauto-outage-pg-'));
  private handle: EmbeddedPostgresHandle | undefined;
  url = '';
  constructor(private readonly port: number) {}
  async start(): Promise<void> {
    this.handle = await startEmbeddedPostgres({ dir: this.dir, port: this.port, persistent: true });
    this.url = this.handle.url;
  }
  async stop(): Promise<void> {
    await this.handle?.stop();
    this.handle = undefined;
  }
  async remove(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

describe(
  'database outages with every service in its own process',
  { skip: process.env.KAFKA_BROKERS ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' },
  () => {
    const adminToken = generateToken('wkadmin_', 40);
    const clusters: ServiceProcesses[] = [];
    const servers: NotesDatabaseServer[] = [];

    const start = async (notesDatabaseUrl: string, noWait = false) => {
      const cluster = await startServiceProcesses({
        databaseServerUrl: process.env.TEST_DATABASE_URL!,
        databasePrefix: `outage_${randomBytes(4).toString('hex')}`,
        platformAdminToken: adminToken,
        encryptionKeys: Keyring.generateSpec(),
        kafkaBrokers: process.env.KAFKA_BROKERS,
        databaseUrls: { 'notes-tasks': notesDatabaseUrl },
        noWait,
      });
      clusters.push(cluster);
      return cluster;
    };
    const call = async (cluster: ServiceProcesses, method: string, path: string, key: string, body?: unknown) => {
      const res = await fetch(`${cluster.url}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: await res.json().catch(() => undefined) };
    };
    const tenantKey = async (cluster: ServiceProcesses) => {
      const tenant = await call(cluster, 'POST', '/admin/tenants', adminToken, {
        name: 'Outage',
        owner: { name: 'Owner', email: 'owner@outage.test' },
      });
      assert.equal(tenant.status, 201, JSON.stringify(tenant.body));
      return tenant.body.api_key as string;
    };
    const exited = (cluster: ServiceProcesses) =>
      [...cluster.children]
        .filter(([, c]) => c.proc.exitCode !== null)
        .map(([n, c]) => `${n} (exit ${c.proc.exitCode})`);

    after(async () => {
      for (const c of clusters)
        for (const { proc } of c.children.values()) if (proc.exitCode === null) proc.kill('SIGKILL');
      for (const s of servers) await s.remove();
    });

    it(`survives its database away for ${OUTAGE_MS / 1000} s: nothing exits, other routes answer, it recovers on its own`, async () => {
      const server = new NotesDatabaseServer(await freePort());
      servers.push(server);
      await server.start();
      const cluster = await start(await ensureDatabase(server.url, 'outage_notes_tasks'));
      const key = await tenantKey(cluster);
      const note = await call(cluster, 'POST', '/notes', key, { title: 'before the outage' });
      assert.equal(note.status, 201);
      assert.equal((await call(cluster, 'POST', '/pipelines', key, { name: 'Sales' })).status, 201);

      await server.stop();
      const notesStatuses = new Map<number, number>();
      const notesAddress = cluster.grpcAddresses['notes-tasks'];
      let sawNotReady = false;
      for (const end = Date.now() + OUTAGE_MS; Date.now() < end;) {
        assert.deepEqual(exited(cluster), [], cluster.output());
        const [members, pipelines, notes] = await Promise.all([
          call(cluster, 'GET', '/members', key),
          call(cluster, 'GET', '/pipelines', key),
          call(cluster, 'GET', '/notes', key),
        ]);
        assert.equal(members.status, 200, 'identity answers through the gateway during the outage');
        assert.equal(pipelines.status, 200, 'crm-pipelines answers through the gateway during the outage');
        notesStatuses.set(notes.status, (notesStatuses.get(notes.status) ?? 0) + 1);
        assert.equal(
          await healthStatus(notesAddress, 'liveness'),
          'SERVING',
          'liveness stays SERVING: Kubernetes restarts nothing',
        );
        if ((await healthStatus(notesAddress, '')) === 'NOT_SERVING') sawNotReady = true;
        await sleep(1_000);
      }
      assert.ok(sawNotReady, 'notes-tasks readiness said NOT_SERVING while its database was away');
      assert.deepEqual(
        [...notesStatuses.keys()],
        [503],
        `notes routes answer 503 (retry later) during the outage, never another error: ${JSON.stringify([...notesStatuses])}`,
      );

      await server.start();
      await eventually(
        'notes answer again',
        async () => (await call(cluster, 'GET', '/notes', key)).status === 200,
        60_000,
        500,
      );
      const notes = await call(cluster, 'GET', '/notes', key);
      assert.deepEqual(
        notes.body.data.map((n: { title: string }) => n.title),
        ['before the outage'],
      );
      assert.equal((await call(cluster, 'POST', '/notes', key, { title: 'after the outage' })).status, 201);
      // Readiness follows at its next database ping (every 5 s).
      await eventually(
        'notes-tasks readiness SERVING again',
        async () => (await healthStatus(notesAddress, '')) === 'SERVING',
        15_000,
        200,
      );
      assert.deepEqual(exited(cluster), [], cluster.output());
      assert.deepEqual(
        await cluster.stop(),
        { gateway: 0, webhooks: 0, apps: 0, calendar: 0, agents: 0, 'crm-pipelines': 0, 'notes-tasks': 0, identity: 0 },
        cluster.output(),
      );
    });

    it('starts while its database is down, waits saying so, and comes up once the database does', async () => {
      const server = new NotesDatabaseServer(await freePort());
      servers.push(server);
      await server.start();
      const notesDatabaseUrl = await ensureDatabase(server.url, 'outage_notes_tasks');
      await server.stop();

      const cluster = await start(notesDatabaseUrl, true);
      const notesOutput = () => cluster.children.get('notes-tasks')!.output.join('');
      await eventually(
        'notes-tasks says it waits for its database',
        () => notesOutput().includes('waiting for the database'),
        30_000,
        200,
      );
      // The rest of the product works meanwhile.
      await eventually(
        'the gateway answers',
        async () =>
          await fetch(`${cluster.url}/healthz`).then(
            (r) => r.ok,
            () => false,
          ),
        30_000,
        200,
      );
      await eventually(
        'identity is ready',
        async () => (await healthStatus(cluster.grpcAddresses.identity, '')) === 'SERVING',
        30_000,
        200,
      );
      const key = await tenantKey(cluster);
      // The sentinel: notes-tasks tried its database twice more meanwhile (it waits, it does not give up).
      const tried = waitingAttempts([notesOutput()], 'database');
      await eventually(
        'notes-tasks tries its database again',
        () => exited(cluster).length > 0 || waitingAttempts([notesOutput()], 'database') >= tried + 2,
        30_000,
        200,
      );
      assert.deepEqual(exited(cluster), [], cluster.output());
      assert.match(notesOutput(), /outage_notes_tasks/, 'the log line names the database it waits for');

      await server.start();
      await cluster.ready(60_000);
      assert.equal((await call(cluster, 'POST', '/notes', key, { title: 'first' })).status, 201);
      assert.deepEqual(
        await cluster.stop(),
        { gateway: 0, webhooks: 0, apps: 0, calendar: 0, agents: 0, 'crm-pipelines': 0, 'notes-tasks': 0, identity: 0 },
        cluster.output(),
      );
    });

    it('a process waiting for its database (a service, the gateway) exits 0 on SIGTERM before trying it again; bad configuration exits 1 naming the variable', async () => {
      const closedPort = await freePort();
      const spawnMain = (env: Record<string, string>, service = 'notes-tasks') => {
        const main = fileURLToPath(new URL(`../../../../services/${service}/dist/main.js`, import.meta.url));
        const proc = spawn(process.execPath, [main], {
          env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
        proc.stderr.on('data', (d: Buffer) => (output += d.toString()));
        return { proc, output: () => output, exit: once(proc, 'exit') as Promise<[number | null, string | null]> };
      };
      const databaseUrl = `postgres://postgres:postgres@127.0.0.1:${closedPort}/notes`;
      const keys = generateCallerKeys('gateway');
      /** The JSON log lines a process wrote from its `shutting down` line (its SIGTERM handler's first) on. */
      const sinceSignal = (output: string) => {
        // Whole lines only: the last one may still be arriving.
        const lines = output
          .split('\n')
          .slice(0, -1)
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { msg: string });
        const at = lines.findIndex((l) => l.msg === 'shutting down');
        return at < 0 ? [] : lines.slice(at).map((l) => l.msg);
      };
      const triedAgain = (msgs: string[]) => msgs.some((m) => m.startsWith('waiting for the database'));
      for (const waiting of [
        spawnMain({
          DATABASE_URL: databaseUrl,
          KAFKA_BROKERS: process.env.KAFKA_BROKERS!,
          GRPC_PORT: '0',
          CALLER_VERIFY_KEYS: keys.verifyKeys,
          LOG_LEVEL: 'info', // the lines of the stop
        }),
        spawnMain(
          {
            DATABASE_URL: databaseUrl,
            ENCRYPTION_KEYS: Keyring.generateSpec(),
            PORT: '0',
            HOST: '127.0.0.1',
            CALLER_SIGNING_KEY: keys.signingKey,
            LOG_LEVEL: 'info',
          },
          'gateway',
        ),
      ]) {
        await eventually(
          'it waits for the database',
          () => waiting.output().includes('waiting for the database'),
          60_000, // a process's start: 1–2 s alone, 15 s and more beside a second `make test`
          100,
        );
        const closed = once(waiting.proc, 'close');
        // "At once" as an order, not a time: the signal ends the wait before the process tries its
        // database again (it tries every 0.25 to 5 s while it waits). One that let the signal wait
        // for its start would log another attempt after `shutting down`, and never exit.
        const retried = new Promise<string>((resolve) =>
          waiting.proc.stdout.on('data', () => {
            if (triedAgain(sinceSignal(waiting.output()))) resolve('it tried its database again after SIGTERM');
          }),
        );
        waiting.proc.kill('SIGTERM');
        const ended = await Promise.race([waiting.exit, retried]);
        if (!Array.isArray(ended)) waiting.proc.kill('SIGKILL'); // it would wait for its database for good
        assert.ok(Array.isArray(ended), `${String(ended)}: ${waiting.output()}`);
        assert.equal(ended[0], 0, waiting.output());
        await closed;
        const stop = sinceSignal(waiting.output());
        assert.ok(stop.includes('stopped by a signal before the start completed'), waiting.output());
        assert.equal(triedAgain(stop), false, waiting.output());
      }

      const misconfigured = spawnMain({
        KAFKA_BROKERS: process.env.KAFKA_BROKERS!,
        CALLER_VERIFY_KEYS: keys.verifyKeys,
      });
      const [badCode] = await misconfigured.exit;
      assert.equal(badCode, 1);
      assert.match(misconfigured.output(), /DATABASE_URL/);
    });
  },
);
