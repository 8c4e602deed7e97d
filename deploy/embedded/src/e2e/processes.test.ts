/**
 * The product as a cluster runs it (startServiceProcesses): every service's own main.js in its own
 * process, configured only through environment variables, talking gRPC to each other and Kafka when
 * the run has a broker. Checks that each starts, the whole works through the gateway, and SIGTERM
 * drains and exits 0.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Keyring, generateToken } from '@workauto/crypto';
import { Downstream, decodeStatusDetails } from '@workauto/grpc';
import { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { eventually } from '@workauto/testing';
import { startServiceProcesses, type ServiceProcesses } from '../processes.js';

// A service on its own needs Kafka (KAFKA_BROKERS is required by every main), as in a cluster.
describe(
  'services as separate processes (the deployment shape)',
  { skip: process.env.KAFKA_BROKERS ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' },
  () => {
    let cluster: ServiceProcesses;
    const adminToken = generateToken('wkadmin_', 40);

    before(async () => {
      const server = process.env.TEST_DATABASE_URL;
      assert.ok(server, 'TEST_DATABASE_URL is set by the test wrapper');
      cluster = await startServiceProcesses({
        databaseServerUrl: server,
        databasePrefix: `proc_${randomBytes(4).toString('hex')}`,
        platformAdminToken: adminToken,
        encryptionKeys: Keyring.generateSpec(),
        kafkaBrokers: process.env.KAFKA_BROKERS,
      });
    });

    after(async () => {
      for (const { proc } of cluster?.children.values() ?? []) if (proc.exitCode === null) proc.kill('SIGKILL');
    });

    it('serves the API through the gateway, with the audit log fed across processes', async () => {
      const call = async (method: string, path: string, key: string, body?: unknown) => {
        const res = await fetch(`${cluster.url}/api/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined,
        });
        return { status: res.status, body: await res.json() };
      };
      const tenant = await call('POST', '/admin/tenants', adminToken, {
        name: 'Procs',
        owner: { name: 'Owner', email: 'owner@procs.test' },
      });
      assert.equal(tenant.status, 201);
      const key = tenant.body.api_key as string;
      assert.equal((await call('POST', '/notes', key, { title: 'from another process' })).status, 201);
      assert.equal((await call('POST', '/pipelines', key, { name: 'Sales' })).status, 201);
      let actions = new Set<string>();
      await eventually(
        () => `note.created and pipeline.created reached the audit log; have ${[...actions].join(', ')}`,
        async () => {
          const log = await call('GET', '/audit-log?limit=200', key);
          actions = new Set((log.body.data as { action: string }[]).map((e) => e.action));
          return actions.has('note.created') && actions.has('pipeline.created');
        },
        20_000,
        50,
      );
    });

    it('refuses a direct gRPC call that is not signed by the gateway, and serves no reflection', async () => {
      const notes = new Downstream('notes_tasks', `127.0.0.1:${cluster.ports['notes-tasks']}`);
      try {
        const loose = new grpc.Metadata();
        loose.set('x-tenant-id', randomUUID());
        const err = await notes.call(NotesTasksServiceService.listNotes, { limit: 10 }, { metadata: loose }).then(
          () => undefined,
          (e: grpc.ServiceError) => decodeStatusDetails(e),
        );
        assert.equal(err?.code, grpc.status.UNAUTHENTICATED, 'a pod that reaches the port cannot act for a tenant');
        assert.equal(err?.reason, 'CALLER_IDENTITY_INVALID');
        const reflection = new grpc.Client(
          `127.0.0.1:${cluster.ports['notes-tasks']}`,
          grpc.credentials.createInsecure(),
        );
        const code = await new Promise<grpc.status>((resolve) => {
          const call = reflection.makeBidiStreamRequest(
            '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
            (b: Buffer) => b,
            (b: Buffer) => b,
          );
          call.on('status', (s: grpc.StatusObject) => resolve(s.code));
          call.on('error', () => undefined);
          call.end(Buffer.from([0x3a, 0x00]));
        });
        reflection.close();
        assert.equal(code, grpc.status.UNIMPLEMENTED, 'reflection is off unless GRPC_REFLECTION=true');
      } finally {
        notes.close();
      }
    });

    it('drains and exits 0 on SIGTERM, the gateway first', async () => {
      const codes = await cluster.stop();
      const output = [...cluster.children].map(([n, c]) => `${n}:\n${c.output.join('')}`).join('\n');
      assert.deepEqual(
        codes,
        { gateway: 0, webhooks: 0, apps: 0, calendar: 0, agents: 0, 'crm-pipelines': 0, 'notes-tasks': 0, identity: 0 },
        output,
      );
    });
  },
);
