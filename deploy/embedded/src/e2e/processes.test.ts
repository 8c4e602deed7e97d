/**
 * The product as a cluster runs it (startServiceProcesses): every service's own main.js in its own
 * process, configured only through environment variables, talking gRPC to each other and Kafka when
 * the run has a broker. Checks that each starts, the whole works through the gateway, and SIGTERM
 * drains and exits 0.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Keyring, generateToken } from '@workauto/crypto';
import { startServiceProcesses, type ServiceProcesses } from '../processes.js';

// A service on its own needs Kafka (KAFKA_BROKERS is required by every main), as in a cluster.
describe('services as separate processes (the deployment shape)', { skip: process.env.KAFKA_BROKERS ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' }, () => {
  let cluster: ServiceProcesses;
  const adminToken = generateToken('wkadmin_', 40);

  before(async () => {
    const server = process.env.TEST_DATABASE_URL;
    assert.ok(server, 'TEST_DATABASE_URL is set by the test wrapper');
    cluster = await startServiceProcesses({
      databaseServerUrl: server, databasePrefix: `proc_${randomBytes(4).toString('hex')}`,
      platformAdminToken: adminToken, encryptionKeys: Keyring.generateSpec(), kafkaBrokers: process.env.KAFKA_BROKERS,
    });
  });

  after(async () => {
    for (const { proc } of cluster?.children.values() ?? []) if (proc.exitCode === null) proc.kill('SIGKILL');
  });

  it('serves the API through the gateway, with the audit log fed across processes', async () => {
    const call = async (method: string, path: string, key: string, body?: unknown) => {
      const res = await fetch(`${cluster.url}/api/v1${path}`, {
        method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const tenant = await call('POST', '/admin/tenants', adminToken, { name: 'Procs', owner: { name: 'Owner', email: 'owner@procs.test' } });
    assert.equal(tenant.status, 201);
    const key = tenant.body.api_key as string;
    assert.equal((await call('POST', '/notes', key, { title: 'from another process' })).status, 201);
    assert.equal((await call('POST', '/pipelines', key, { name: 'Sales' })).status, 201);
    for (let i = 0; ; i++) {
      const log = await call('GET', '/audit-log?limit=200', key);
      const actions = new Set((log.body.data as { action: string }[]).map((e) => e.action));
      if (actions.has('note.created') && actions.has('pipeline.created')) break;
      assert.ok(i < 200, `note.created and pipeline.created reached the audit log; have ${[...actions].join(', ')}`);
      await sleep(50);
    }
  });

  it('drains and exits 0 on SIGTERM, the gateway first', async () => {
    const codes = await cluster.stop();
    const output = [...cluster.children].map(([n, c]) => `${n}:\n${c.output.join('')}`).join('\n');
    assert.deepEqual(codes, { gateway: 0, 'crm-pipelines': 0, 'notes-tasks': 0, identity: 0 }, output);
  });
});
