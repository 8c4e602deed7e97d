/**
 * A rolling upgrade's middle: this commit's migrations are applied (the migrate command, as the
 * chart's Job runs it, while a new pod started with MIGRATE_ON_START=false waits for it) and the
 * previous release's pods still serve. The previous release
 * (.ci/previous-release, built once into .cache by .ci/previous-release.sh) runs as processes on
 * those databases, and requests through its gateway create and read in every service and get a
 * webhook delivered (the path that broke when a release dropped a column its predecessor wrote).
 * Expand/contract rules: docs/operations.md, Upgrades.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Keyring, generateToken } from '@workauto/crypto';
import { createPool, ensureDatabase } from '@workauto/db';
import { generateCallerKeys } from '@workauto/grpc';
import { eventually, freePort, healthStatus } from '@workauto/testing';
import { startReceiver, type Receiver } from '@workauto/webhooks/testing';
import { startServiceProcesses, type ServiceName, type ServiceProcesses } from '../processes.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
/** Each process's database (named as startServiceProcesses names them). */
const DATABASES: Record<ServiceName, string> = {
  identity: 'identity',
  'notes-tasks': 'notes_tasks',
  'crm-pipelines': 'crm_pipelines',
  webhooks: 'webhooks',
  apps: 'apps',
  calendar: 'calendar',
  agents: 'agents',
  gateway: 'gateway',
};

/** `node services/<name>/dist/main.js migrate` of this commit; resolves to its exit code and output. */
function migrate(name: ServiceName, databaseUrl: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [`services/${name}/dist/main.js`, 'migrate'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out })));
}

describe(
  'an upgrade from the previous release: its services serve on databases migrated by this commit',
  { skip: process.env.KAFKA_BROKERS ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' },
  () => {
    let previous: string;
    let cluster: ServiceProcesses | undefined;
    const urls = {} as Record<ServiceName, string>;
    const adminToken = generateToken('wkadmin_', 40);
    let receiver: Receiver | undefined;

    before(async () => {
      // Built by make test before the suite; built here (minutes, once) when this file runs alone.
      const built = spawnSync(`${ROOT}.ci/previous-release.sh`, {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      assert.equal(built.status, 0, '.ci/previous-release.sh builds the previous release (its output is above)');
      previous = built.stdout.trim();
      const server = process.env.TEST_DATABASE_URL;
      assert.ok(server, 'TEST_DATABASE_URL is set by the test wrapper');
      const prefix = `upg_${randomBytes(4).toString('hex')}`;
      for (const [name, db] of Object.entries(DATABASES))
        urls[name as ServiceName] = await ensureDatabase(server, `${prefix}_${db}`);
    });

    after(async () => {
      for (const { proc } of cluster?.children.values() ?? []) if (proc.exitCode === null) proc.kill('SIGKILL');
      await receiver?.close();
    });

    it("this commit's webhooks with MIGRATE_ON_START=false waits for the migrate command, which migrates every process's database, then serves", async () => {
      // A new pod of the rollout, started before the chart's migrate Job has run.
      const port = await freePort();
      const address = `127.0.0.1:${port}`;
      const webhooks = spawn(process.execPath, ['services/webhooks/dist/main.js'], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          MIGRATE_ON_START: 'false',
          DATABASE_URL: urls.webhooks,
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: String(port),
          CALLER_VERIFY_KEYS: generateCallerKeys('gateway').verifyKeys,
          ENCRYPTION_KEYS: Keyring.generateSpec(),
          KAFKA_BROKERS: process.env.KAFKA_BROKERS!,
          KAFKA_NAMESPACE: `upg_${randomBytes(4).toString('hex')}.`,
        },
      });
      let out = '';
      webhooks.stdout.on('data', (c: Buffer) => (out += c.toString()));
      webhooks.stderr.on('data', (c: Buffer) => (out += c.toString()));
      try {
        await eventually(
          'webhooks logs what it waits for',
          () => out.includes('"msg":"waiting for migrations'),
          30_000,
        );
        assert.match(
          out,
          /waiting for migrations 0000_outbox, .*0002_drop_last_success_at before serving \(MIGRATE_ON_START=false\): run the migrate Job \(node services\/webhooks\/dist\/main\.js migrate\)/,
        );
        assert.match(await healthStatus(address, ''), /^error: /, 'not serving (not even listening) while it waits');

        const runs = await Promise.all(
          Object.keys(DATABASES).map(async (name) => ({
            name,
            ...(await migrate(name as ServiceName, urls[name as ServiceName])),
          })),
        );
        for (const run of runs) {
          assert.equal(run.code, 0, `${run.name} migrate:\n${run.out}`);
          assert.match(run.out, /"msg":"applied \d+ migrations"/, `${run.name} migrate:\n${run.out}`);
        }
        await eventually(
          'webhooks serves once migrated',
          async () => (await healthStatus(address, '')) === 'SERVING',
          30_000,
          200,
        ).catch((err: Error) => Promise.reject(new Error(`${err.message}:\n${out}`)));
      } finally {
        // Only the previous release delivers below: the path that broke. (Its drain is tested elsewhere.)
        webhooks.kill('SIGKILL');
        if (webhooks.exitCode === null) await once(webhooks, 'exit');
      }
    });

    it('the previous release starts on them and serves: create and read in every service, and a webhook delivery', async () => {
      cluster = await startServiceProcesses({
        root: previous,
        databaseServerUrl: process.env.TEST_DATABASE_URL!,
        databasePrefix: `upg_${randomBytes(4).toString('hex')}`,
        databaseUrls: urls,
        platformAdminToken: adminToken,
        encryptionKeys: Keyring.generateSpec(),
        kafkaBrokers: process.env.KAFKA_BROKERS,
      });
      const url = cluster.url;
      const call = async (method: string, path: string, key: string, body?: unknown) => {
        const res = await fetch(`${url}/api/v1${path}`, {
          method,
          headers: {
            authorization: `Bearer ${key}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, body: text ? JSON.parse(text) : undefined };
      };
      /** Creates with POST (or PUT) and reads it back by id, answering what was read. */
      const createAndRead = async (
        what: string,
        key: string,
        create: [string, string, unknown],
        read: (id: string) => string,
      ) => {
        const created = await call(create[0], create[1], key, create[2]);
        assert.ok(
          created.status === 201 || created.status === 200,
          `${what}: ${created.status} ${JSON.stringify(created.body)}`,
        );
        const got = await call('GET', read(created.body.id), key);
        assert.equal(got.status, 200, `${what} read back: ${JSON.stringify(got.body)}\n${cluster!.output()}`);
        assert.equal(got.body.id, created.body.id);
        return got.body;
      };

      const tenant = await call('POST', '/admin/tenants', adminToken, {
        name: 'Upgrade',
        owner: { name: 'Owner', email: 'owner@upgrade.test' },
      });
      assert.equal(tenant.status, 201, JSON.stringify(tenant.body));
      const key = tenant.body.api_key as string;
      // identity
      const members = await call('GET', '/members', key);
      assert.equal(members.status, 200);
      const invitation = await call('POST', '/invitations', key, { email: 'new@upgrade.test', role: 'member' });
      assert.equal(invitation.status, 201, JSON.stringify(invitation.body));
      const invitations = await call('GET', '/invitations', key);
      assert.ok(
        invitations.body.data.some((i: { id: string }) => i.id === invitation.body.id),
        'the invitation is listed',
      );
      // The webhook endpoint first: the note below is the event it must receive.
      receiver = await startReceiver();
      const endpoint = await createAndRead(
        'webhook endpoint',
        key,
        ['POST', '/webhook-endpoints', { url: receiver.url, event_types: ['note.created'] }],
        (id) => `/webhook-endpoints/${id}`,
      );
      // notes-tasks
      const note = await createAndRead(
        'note',
        key,
        ['POST', '/notes', { title: 'Across an upgrade' }],
        (id) => `/notes/${id}`,
      );
      await createAndRead('task', key, ['POST', '/tasks', { title: 'Still works' }], (id) => `/tasks/${id}`);
      // crm-pipelines
      await createAndRead(
        'pipeline',
        key,
        ['POST', '/pipelines', { name: 'Sales', stages: [{ name: 'Open', stage_type: 'open' }] }],
        (id) => `/pipelines/${id}`,
      );
      await createAndRead('contact', key, ['POST', '/contacts', { name: 'Ada' }], (id) => `/contacts/${id}`);
      // calendar
      await createAndRead(
        'calendar',
        key,
        ['POST', '/calendars', { name: 'Team', timezone: 'Europe/Paris' }],
        (id) => `/calendars/${id}`,
      );
      // apps (read by slug; the MCP server is probed later, creating does not need it)
      await createAndRead(
        'app',
        key,
        ['POST', '/apps', { slug: 'search', display_name: 'Search', mcp_server_url: 'http://127.0.0.1:9/mcp' }],
        () => `/apps/search`,
      );
      // agents
      const config = await call('PUT', '/agent-configs/task-triage', key, { budget_default_cents: 500 });
      assert.equal(config.status, 200, JSON.stringify(config.body));
      assert.equal((await call('GET', '/agent-configs/task-triage', key)).body.budget_default_cents, 500);

      // webhooks: the note's event reaches the receiver and the previous release records the attempt.
      await eventually('the receiver got note.created', () =>
        receiver!.received.some((r) => JSON.parse(r.body).data?.id === note.id),
      );
      let status = '';
      await eventually(
        "the delivery recorded as delivered by the previous release's webhooks service",
        async () => {
          const events = await call('GET', `/webhook-events?endpoint_id=${endpoint.id}&event_type=note.created`, key);
          const event = events.body.data?.[0];
          if (!event) return false;
          status = (await call('GET', `/webhook-events/${event.id}`, key)).body.status;
          return status === 'delivered';
        },
        20_000,
        200,
      ).catch(async (err: Error) => {
        // The delivery worker logs its failures below warn: the job's last error says what broke.
        const db = createPool(urls.webhooks, { max: 1 });
        const jobs = await db.query('SELECT state, attempts, last_error FROM jobs').finally(() => db.end());
        throw new Error(`${err.message} (status ${status}); delivery jobs: ${JSON.stringify(jobs.rows)}`);
      });
    });
  },
);
