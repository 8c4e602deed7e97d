import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { createLogger, type Logger } from '@workauto/logger';
import { eventually, testDatabase, failure, testCallerKeys, TestClient } from '@workauto/testing';
import { generateCallerKeys, mergeVerifyKeys, type AccessLevels, type Caller } from '@workauto/grpc';
import { createNotesTasksService } from '@workauto/notes-tasks';
import { createCrmPipelinesService } from '@workauto/crm-pipelines';
import { createAppsService } from '@workauto/apps';
import { EgressPolicy } from '@workauto/egress';
import { AppsServiceService as Apps } from '@workauto/protos/workauto/apps/v1/apps.js';
import {
  AgentRunStatus,
  AgentsServiceService as S,
  type AgentRun,
  type CreateAgentRunRequest,
} from '@workauto/protos/workauto/agents/v1/agents.js';
import { createAgentsService, type AgentsConfig, type AgentsService } from './app.js';
import { FakeProvider, fakeProviderSettings } from './testing/fake-provider.js';

export { S, failure };

/** agents on a fresh database with a fake provider on loopback, called over real gRPC, with a SQL client for checks. */
export async function startAgents(
  opts: { config?: Partial<AgentsConfig>; logger?: Logger; databaseUrl?: string; fake?: FakeProvider } = {},
) {
  const databaseUrl = opts.databaseUrl ?? (await testDatabase('agents'));
  const fake = opts.fake ?? (await FakeProvider.start());
  const encryptionKeys = opts.config?.encryptionKeys ?? Keyring.generateSpec('k1');
  const service: AgentsService = await createAgentsService(
    {
      databaseUrl,
      host: '127.0.0.1',
      port: 0,
      callerVerifyKeys: testCallerKeys.verifyKeys,
      encryptionKeys,
      ...opts.config,
      providers: { ...fakeProviderSettings(fake), ...opts.config?.providers },
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
 * Runs need the services their tools call: real notes-tasks and crm-pipelines (and with `apps`, a
 * real apps service for MCP app tools) that trust the agents service's own caller key, and
 * `replicas` agents processes-in-process on one database.
 */
export async function startRunStack(
  opts: { replicas?: number; config?: Partial<AgentsConfig>; apps?: { toolCallTimeoutMs: number } } = {},
) {
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
  const egress = new EgressPolicy({ allowPrivate: true }); // MCP servers of the tests are on loopback
  const apps = opts.apps
    ? await createAppsService(
        {
          databaseUrl: await testDatabase('apps'),
          host: '127.0.0.1',
          port: 0,
          callerVerifyKeys,
          encryptionKeys: Keyring.generateSpec('k1'),
          egress,
          probeIntervalMs: 3_600_000,
          probeTimeoutMs: 5_000,
          toolCallTimeoutMs: opts.apps.toolCallTimeoutMs,
        },
        silent,
      )
    : undefined;
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
      ...(apps ? { apps: `127.0.0.1:${apps.port}` } : {}),
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
  const appsClient = apps
    ? new TestClient('apps', `127.0.0.1:${apps.port}`, { volumeThreshold: 100_000, deadlineMs: 30_000 })
    : undefined;
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
    /**
     * Registers an MCP server as the tenant's app `slug` (the apps service probes it) and enables
     * `tools`: runs of the tenant are offered them as `<slug>__<tool>`.
     */
    async addApp(caller: { caller: Caller }, slug: string, url: string, tools: string[]) {
      if (!appsClient) throw new Error('start the stack with apps to register apps');
      await appsClient.call(Apps.createApp, { slug, display_name: slug, mcp_server_url: url }, caller);
      await appsClient.call(Apps.probeApp, { slug }, caller);
      await appsClient.call(Apps.updateApp, { slug, enabled_tools: tools }, caller);
    },
    async stopNotes() {
      stopped.add('notes');
      await notes.stop();
    },
    async stop() {
      notesClient.close();
      crmClient.close();
      await notesDb.end();
      appsClient?.close();
      for (const r of replicas) await r.stop().catch(() => undefined);
      await apps?.stop();
      await egress.close();
      if (!stopped.has('notes')) await notes.stop();
      await crm.stop();
      await fake.stop();
    },
  };
}

export { newTenant as tenant } from '@workauto/testing';

/** Call options of a tenant's member whose access levels the gateway resolved to `access` (signed with the rest). */
export function withAccess(t: { id: string; memberId: string }, access: AccessLevels): { caller: Caller } {
  return {
    caller: {
      requestId: randomUUID(),
      tenantId: t.id,
      actor: { type: 'api_key', id: randomUUID(), memberId: t.memberId, access },
    },
  };
}

/** Creates a run (input "go" unless given) and waits until it ends: the run as GET shows it then. */
export async function runUntilDone(
  client: TestClient,
  t: { call: { caller: Caller } },
  blueprint: string,
  body: Partial<Omit<CreateAgentRunRequest, 'blueprint'>> = {},
): Promise<AgentRun> {
  const run = await client.call(S.createAgentRun, { blueprint, input: 'go', ...body }, t.call);
  if (run.status !== AgentRunStatus.AGENT_RUN_STATUS_QUEUED) throw new Error(`run ${run.id} was not created queued`);
  let last = run;
  await eventually(
    `run ${run.id} ends`,
    async () => {
      last = await client.call(S.getAgentRun, { blueprint, id: run.id }, t.call);
      return (
        last.status !== AgentRunStatus.AGENT_RUN_STATUS_QUEUED &&
        last.status !== AgentRunStatus.AGENT_RUN_STATUS_RUNNING
      );
    },
    20_000,
    50,
  );
  return last;
}
