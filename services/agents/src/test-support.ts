import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { createLogger, type Logger } from '@workauto/logger';
import { testDatabase, failure, testCallerKeys, TestClient } from '@workauto/testing';
import { generateCallerKeys, mergeVerifyKeys } from '@workauto/grpc';
import { createNotesTasksService } from '@workauto/notes-tasks';
import { createCrmPipelinesService } from '@workauto/crm-pipelines';
import { AgentsServiceService as S } from '@workauto/protos/workauto/agents/v1/agents.js';
import { createAgentsService, type AgentsConfig, type RunningService } from './app.js';
import { FakeProvider } from './testing/fake-provider.js';

export { S, failure };

/** agents on a fresh database with a fake provider on loopback, called over real gRPC, with a SQL client for checks. */
export async function startAgents(
  opts: { config?: Partial<AgentsConfig>; logger?: Logger; databaseUrl?: string; fake?: FakeProvider } = {},
) {
  const databaseUrl = opts.databaseUrl ?? (await testDatabase('agents'));
  const fake = opts.fake ?? (await FakeProvider.start());
  const encryptionKeys = opts.config?.encryptionKeys ?? Keyring.generateSpec('k1');
  const service: RunningService = await createAgentsService(
    {
      databaseUrl,
      host: '127.0.0.1',
      port: 0,
      callerVerifyKeys: testCallerKeys.verifyKeys,
      encryptionKeys,
      ...opts.config,
      providers: {
        openaiBaseUrl: fake.openaiBaseUrl,
        anthropicBaseUrl: fake.anthropicBaseUrl,
        probeTimeoutMs: 1_000,
        chatTimeoutMs: 5_000,
        chatMaxRetries: 0,
        ...opts.config?.providers,
      },
    },
    opts.logger ?? createLogger('agents', 'silent'),
  );
  const client = new TestClient('agents', `127.0.0.1:${service.port}`, {
    volumeThreshold: 100_000,
    deadlineMs: 30_000,
  });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  return {
    databaseUrl,
    encryptionKeys,
    client,
    db,
    fake,
    service,
    async stop() {
      client.close();
      await db.end();
      await service.stop();
      if (!opts.fake) await fake.stop();
    },
  };
}

/** A key no test shares: `sk-ant-…` for Anthropic, `sk-…` for OpenAI. */
export function newKey(provider: 'openai' | 'anthropic'): string {
  return `${provider === 'anthropic' ? 'sk-ant-' : 'sk-'}${randomUUID().replace(/-/g, '')}${randomUUID().replace(/-/g, '')}`;
}

/**
 * Runs need the services their tools call: real notes-tasks and crm-pipelines that trust the
 * agents service's own caller key, and `replicas` agents processes-in-process on one database.
 */
export async function startRunStack(opts: { replicas?: number; config?: Partial<AgentsConfig> } = {}) {
  const agentsKeys = generateCallerKeys('agents');
  const callerVerifyKeys = mergeVerifyKeys(testCallerKeys.verifyKeys, agentsKeys.verifyKeys);
  const silent = createLogger('test', 'silent');
  const notesUrl = await testDatabase('notes');
  const crmUrl = await testDatabase('crm');
  const notes = await createNotesTasksService(
    { databaseUrl: notesUrl, host: '127.0.0.1', port: 0, callerVerifyKeys },
    silent,
  );
  const crm = await createCrmPipelinesService(
    { databaseUrl: crmUrl, host: '127.0.0.1', port: 0, callerVerifyKeys },
    silent,
  );
  const fake = await FakeProvider.start();
  const databaseUrl = await testDatabase('agents');
  const encryptionKeys = Keyring.generateSpec('k1');
  const config: Partial<AgentsConfig> = {
    encryptionKeys,
    callerSigningKey: agentsKeys.signingKey,
    ...opts.config,
    downstreams: {
      notes_tasks: `127.0.0.1:${notes.port}`,
      crm_pipelines: `127.0.0.1:${crm.port}`,
      ...opts.config?.downstreams,
    },
    runs: { heartbeatMs: 200, pollMs: 50, leaseMs: 2_000, schedulerPollMs: 100, ...opts.config?.runs },
  };
  const replicas: Awaited<ReturnType<typeof startAgents>>[] = [];
  for (let i = 0; i < (opts.replicas ?? 1); i++) replicas.push(await startAgents({ databaseUrl, fake, config }));
  const notesClient = new TestClient('notes_tasks', `127.0.0.1:${notes.port}`, {
    volumeThreshold: 100_000,
    deadlineMs: 30_000,
  });
  const crmClient = new TestClient('crm_pipelines', `127.0.0.1:${crm.port}`, {
    volumeThreshold: 100_000,
    deadlineMs: 30_000,
  });
  const notesDb = new pg.Pool({ connectionString: notesUrl, max: 2 });
  const stopped = new Set<string>();
  return {
    ...replicas[0]!,
    replicas,
    fake,
    notes,
    crm,
    notesClient,
    crmClient,
    notesDb,
    config,
    async stopNotes() {
      stopped.add('notes');
      await notes.stop();
    },
    async stop() {
      notesClient.close();
      crmClient.close();
      await notesDb.end();
      for (const r of replicas) await r.stop().catch(() => undefined);
      if (!stopped.has('notes')) await notes.stop();
      await crm.stop();
      await fake.stop();
    },
  };
}

export { newTenant as tenant } from '@workauto/testing';
