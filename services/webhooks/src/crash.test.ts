/**
 * The deployment shape: a webhooks replica in its own process (main.js, configured by env, real
 * Kafka) is killed (SIGKILL) in the middle of an attempt. Its lease expires and another replica
 * attempts the delivery again, with the same webhook-id, and it succeeds. Needs KAFKA_BROKERS
 * (make test starts a broker).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { Keyring } from '@workauto/crypto';
import { createTransport } from '@workauto/events';
import { createLogger } from '@workauto/logger';
import { WebhookEventStatus } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { eventually, freePort, healthStatus, testCallerKeys, testDatabase, TestClient } from '@workauto/testing';
import { S, startWebhooks, tenant } from './test-support.js';
import { startReceiver } from './testing/receiver.js';

const brokers = process.env.KAFKA_BROKERS;
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

describe(
  'a replica killed mid-attempt',
  { skip: brokers ? false : 'needs KAFKA_BROKERS (make test starts Kafka)' },
  () => {
    const cleanup: (() => Promise<unknown>)[] = [];
    after(async () => {
      for (const c of cleanup.reverse()) await c().catch(() => undefined);
    });

    it('loses its lease, and another replica delivers the event again (same webhook-id)', async () => {
      const databaseUrl = await testDatabase('webhooks');
      const encryptionKeys = Keyring.generateSpec();
      const namespace = `crash_${randomBytes(4).toString('hex')}.`;
      const receiver = await startReceiver((_req, n) => (n === 0 ? { status: 200, hang: true } : { status: 200 }));
      cleanup.push(() => receiver.close());
      const port = await freePort();
      const child = spawn(process.execPath, ['services/webhooks/dist/main.js'], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          LOG_LEVEL: 'warn',
          DATABASE_URL: databaseUrl,
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: String(port),
          CALLER_VERIFY_KEYS: testCallerKeys.verifyKeys,
          ENCRYPTION_KEYS: encryptionKeys,
          KAFKA_BROKERS: brokers!,
          KAFKA_NAMESPACE: namespace,
          EGRESS_ALLOW_PRIVATE: 'true',
          WEBHOOK_LEASE_MS: '1500',
          WEBHOOK_TIMEOUT_MS: '60000',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const output: string[] = [];
      child.stdout.on('data', (d: Buffer) => output.push(d.toString()));
      child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
      cleanup.push(async () => child.exitCode === null && child.kill('SIGKILL'));
      await eventually(
        'the replica serves',
        async () => (await healthStatus(`127.0.0.1:${port}`, '')) === 'SERVING',
        60_000,
        200,
      ).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}\n${output.join('')}`);
      });

      const t = tenant();
      const client = new TestClient('webhooks', `127.0.0.1:${port}`, { volumeThreshold: 100_000, deadlineMs: 30_000 });
      cleanup.push(async () => client.close());
      await client.call(S.createWebhookEndpoint, { url: receiver.url, event_types: ['note.*'], channels: [] }, t.call);

      // The second replica shares the database and the broker; it has no delivery workers yet.
      const transport = createTransport({
        brokers,
        clientId: 'crash-test',
        logger: createLogger('crash-test', 'silent'),
        namespace,
      });
      const consumerOnly = await startWebhooks({
        databaseUrl,
        transport,
        encryptionKeys,
        settings: { workerConcurrency: 0, leaseMs: 1_500 },
      });
      cleanup.push(() => consumerOnly.stop().then(() => transport.close()));
      const id = await consumerOnly.publish({ tenantId: t.id, type: 'note.created' });

      const [first] = await receiver.waitFor(1, 30_000);
      assert.equal(first!.headers['webhook-id'], id);
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));

      const worker = await startWebhooks({
        databaseUrl,
        transport: createTransport({ clientId: 'crash-test-2', logger: createLogger('x', 'silent') }),
        encryptionKeys,
        settings: { leaseMs: 1_500 },
      });
      cleanup.push(() => worker.stop());
      const [, again] = await receiver.waitFor(2, 30_000);
      assert.equal(again!.headers['webhook-id'], id, 'the same webhook-id: receivers deduplicate on it');
      await eventually(
        'the event is delivered',
        async () =>
          (await worker.client.call(S.getWebhookEvent, { id }, t.call)).status ===
          WebhookEventStatus.WEBHOOK_EVENT_STATUS_DELIVERED,
        15_000,
      );
      // A later event arrives third: the killed attempt was not sent a third time before it.
      const later = await consumerOnly.publish({ tenantId: t.id, type: 'note.updated' });
      await receiver.waitFor(3, 60_000); // through Kafka and the job queue: slow on a loaded machine
      assert.deepEqual(
        receiver.received.map((r) => r.headers['webhook-id']),
        [id, id, later],
      );
    });
  },
);
