/**
 * A worker process that dies mid-run (SIGKILL: no shutdown, no release): its run's lease expires,
 * another process runs it again once, and when that one dies too the run fails worker_lost.
 * Real agents processes (dist/main.js, configured by environment as in a cluster).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { eventually, freePort, healthStatus, testCallerKeys, testDatabase, TestClient } from '@workauto/testing';
import { AgentRunStatus, FailureCategory } from '@workauto/protos/workauto/agents/v1/agents.js';
import { S, newKey, tenant } from './test-support.js';
import { FakeProvider } from './testing/fake-provider.js';

const MAIN = fileURLToPath(new URL('./main.js', import.meta.url));

describe(
  'a vanished worker',
  {
    skip: process.env.KAFKA_BROKERS
      ? false
      : 'a service process needs Kafka: run through make test (with-infra starts one)',
  },
  () => {
    const children: ChildProcess[] = [];
    after(() => {
      for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    });

    it('re-queues the run once, then fails it worker_lost', async () => {
      const fake = await FakeProvider.start();
      const databaseUrl = await testDatabase('agents_lost');
      const encryptionKeys = Keyring.generateSpec('k1');
      const namespace = `lost${randomBytes(3).toString('hex')}.`;
      const output: string[] = [];
      const start = async () => {
        const port = await freePort();
        const child = spawn(process.execPath, [MAIN], {
          env: {
            PATH: process.env.PATH ?? '',
            LOG_LEVEL: 'warn',
            DATABASE_URL: databaseUrl,
            GRPC_HOST: '127.0.0.1',
            GRPC_PORT: String(port),
            CALLER_VERIFY_KEYS: testCallerKeys.verifyKeys,
            ENCRYPTION_KEYS: encryptionKeys,
            KAFKA_BROKERS: process.env.KAFKA_BROKERS!,
            KAFKA_NAMESPACE: namespace,
            OPENAI_BASE_URL: fake.openaiBaseUrl,
            ANTHROPIC_BASE_URL: fake.anthropicBaseUrl,
            AGENT_PROVIDER_MAX_RETRIES: '0',
            AGENT_RUN_LEASE_MS: '1000',
            AGENT_RUN_HEARTBEAT_MS: '200',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        child.stdout.on('data', (d: Buffer) => output.push(d.toString()));
        child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
        children.push(child);
        await eventually(
          `agents process serving:\n${output.join('')}`,
          async () => (await healthStatus(`127.0.0.1:${port}`, '')) === 'SERVING',
          30_000,
          100,
        );
        return { child, port };
      };
      const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
      try {
        const first = await start();
        const client = new TestClient('agents', `127.0.0.1:${first.port}`, {
          volumeThreshold: 100_000,
          deadlineMs: 10_000,
        });
        const t = tenant();
        const k = newKey('openai');
        // Each attempt: one priced answer (4 ¢) asking for a tool, then a call that hangs until the worker dies.
        const priced = { tools: [{ name: 'no_such_tool', arguments: {} }], usage: { input: 100_000, output: 0 } };
        fake.script(k, [priced, { hang: true }, priced, { hang: true }, { text: 'never' }]);
        await client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0 }, t.call);
        const run = await client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'work' }, t.call);
        client.close();
        await eventually(
          'the first worker hangs in its second provider call',
          () => fake.chats(k).length === 2,
          10_000,
        );
        first.child.kill('SIGKILL');
        const second = await start();
        await eventually(
          'the run is re-queued once and a second worker runs it',
          () => fake.chats(k).length === 4,
          15_000,
        );
        const { rows } = await db.query(
          'SELECT status, claims, cost_micro_cents::int AS cost_micro_cents FROM agent_runs WHERE id = $1',
          [run.id],
        );
        assert.deepEqual(
          rows[0],
          { status: 'running', claims: 2, cost_micro_cents: 8_000_000 },
          "the second attempt adds to the first one's cost",
        );
        second.child.kill('SIGKILL');
        const third = await start();
        await eventually(
          'the run fails worker_lost',
          async () =>
            (await db.query('SELECT status FROM agent_runs WHERE id = $1', [run.id])).rows[0].status === 'failed',
          15_000,
          100,
        );
        assert.equal(fake.chats(k).length, 4, 'not run a third time');
        const c = new TestClient('agents', `127.0.0.1:${third.port}`, { volumeThreshold: 100_000, deadlineMs: 10_000 });
        const failed = await c.call(S.getAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
        c.close();
        assert.equal(failed.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
        assert.equal(failed.failure_category, FailureCategory.FAILURE_CATEGORY_WORKER_LOST);
        assert.equal(failed.consecutive_failures, 1);
        assert.equal(failed.cost_usd_cents, 8, "both attempts' cost is kept");
        third.child.kill('SIGTERM');
      } finally {
        await db.end();
        await fake.stop();
      }
    });
  },
);
