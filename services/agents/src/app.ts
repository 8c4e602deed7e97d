import { fileURLToPath } from 'node:url';
import { Keyring } from '@workauto/crypto';
import { EgressPolicy } from '@workauto/egress';
import { JOBS_MIGRATIONS, type Clock } from '@workauto/jobs';
import { createLogger, type Logger } from '@workauto/logger';
import { AgentsServiceService } from '@workauto/protos/workauto/agents/v1/agents.js';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { agentsHandlers } from './handlers/index.js';
import { createProviders, type ProviderSettings } from './providers/index.js';
import { rewrapKeysWorker } from './worker/rewrap.js';
import type { ProviderName } from './domain/blueprints.js';
import { CallerSigner } from '@workauto/grpc';
import { ToolClients, type ToolService } from './tools/clients.js';
import { DEFAULT_RUN_SETTINGS, RunWorker, type RunSettings } from './worker/runs.js';
import { schedulerWorker } from './worker/scheduler.js';
import { RunEventHub } from './live/hub.js';
import { DEFAULT_RUN_EVENT_SETTINGS, type RunEventSettings } from './handlers/common.js';

export interface AgentsConfig extends ServiceConfig {
  /** Keyring for provider keys at rest (`id:base64key,…`, first active); see @workauto/crypto. */
  encryptionKeys: string;
  /** Provider base URLs (as the official SDKs take them), timeouts and retries. */
  providers?: Partial<ProviderSettings>;
  /**
   * The policy calls to tenants' base URLs go through (EgressPolicy.fromEnv in main: EGRESS_ALLOW_PRIVATE,
   * EGRESS_ALLOWED_CIDRS). Default: https to public addresses only, owned and closed by the service.
   */
  egress?: EgressPolicy;
  /** The platform's own keys (OPENAI_API_KEY, ANTHROPIC_API_KEY): runs of tenants without a key of their own. */
  platformKeys?: Partial<Record<ProviderName, string>>;
  /** AGENT_PLATFORM_FEE_BPS: the fee on runs that used a platform key, in basis points of their cost. */
  platformFeeBps?: number;
  /** host:port of the services whose tools runs call (NOTES_TASKS_ADDR, CRM_PIPELINES_ADDR, APPS_ADDR). */
  downstreams?: Partial<Record<ToolService, string>>;
  /** Run workers and the scheduler. */
  runs?: Partial<RunSettings>;
  /** Live run events: heartbeat, longest stream, client retry (AGENT_EVENTS_*). */
  runEvents?: Partial<RunEventSettings>;
  /** The clock schedules are read and checked by (tests move one by hand); the system's by default. */
  clock?: Clock;
}

/** The running service, and what its tests look at: the event streams open in this process. */
export interface AgentsService extends RunningService {
  openEventStreams(): number;
}

export type { RunningService };

export const DEFAULT_PROVIDER_SETTINGS: ProviderSettings = {
  openaiBaseUrl: 'https://api.openai.com/v1',
  anthropicBaseUrl: 'https://api.anthropic.com',
  probeTimeoutMs: 10_000,
  chatTimeoutMs: 60_000,
  chatMaxRetries: 2,
};

/** agents with the shared start-up (@workauto/service): the same steps for main.ts, make dev and tests. */
export async function createAgentsService(
  config: AgentsConfig,
  logger: Logger = createLogger('agents'),
): Promise<AgentsService> {
  const keyring = Keyring.fromEnv(config.encryptionKeys);
  const ownEgress = config.egress ? undefined : new EgressPolicy();
  const egress = config.egress ?? ownEgress!;
  // The platform's provider URLs are the operator's (OPENAI_BASE_URL, ANTHROPIC_BASE_URL): any address,
  // dialled directly, as the global fetch did; what the policy adds is its client (fetchWhole).
  const platformEgress = new EgressPolicy({ allowPrivate: true });
  const providers = createProviders({ ...DEFAULT_PROVIDER_SETTINGS, ...config.providers }, egress, platformEgress);
  // Runs call other services as their agent, signed with this service's own key.
  const signer = config.callerSigningKey ? new CallerSigner(config.callerSigningKey, { issuer: 'agents' }) : undefined;
  const settings = { ...DEFAULT_RUN_SETTINGS, ...config.runs };
  const live = {
    hub: new RunEventHub(config.databaseUrl, logger),
    settings: { ...DEFAULT_RUN_EVENT_SETTINGS, ...config.runEvents },
  };
  // MCP tool calls act as the calling member, signed with this service's own key (ctx.toMetadata).
  const tools = new ToolClients(config.downstreams ?? {});
  const running = await startService(
    {
      name: 'agents',
      errorDomain: 'agents.workauto',
      protoFile: 'workauto/agents/v1/agents.proto',
      grpcService: 'workauto.agents.v1.AgentsService',
      definition: AgentsServiceService,
      migrations: [JOBS_MIGRATIONS, fileURLToPath(new URL('../migrations', import.meta.url))],
      handlers: (pool) =>
        agentsHandlers({ pool, keyring, providers, egress, live, tools, now: () => config.clock?.now() ?? new Date() }),
      workers: ({ pool }) => {
        const clients = new ToolClients(config.downstreams ?? {});
        const runs = new RunWorker({
          pool,
          keyring,
          providers,
          clients,
          signer,
          settings,
          logger,
          platformKeys: config.platformKeys ?? {},
          platformFeeBps: config.platformFeeBps ?? 0,
        }).worker();
        return [
          rewrapKeysWorker(pool, keyring, logger, config.clock),
          // The connections close with the service (not when a crashed loop is restarted).
          { name: runs.name, run: (ctx) => runs.run(ctx).finally(() => ctx.signal.aborted && clients.close()) },
          schedulerWorker(pool, logger, settings.schedulerPollMs, config.clock),
          live.hub.worker(),
        ];
      },
      // An event stream holds its call for minutes: the connection it came on outlives its max age
      // (which rebalances clients over replicas) until the longest stream has ended, instead of
      // cutting it 30 s after.
      grpcServerOptions: { 'grpc.max_connection_age_grace_ms': live.settings.maxStreamMs + 30_000 },
    },
    config,
    logger,
  ).catch(async (err: unknown) => {
    tools.close();
    await Promise.all([ownEgress?.close(), platformEgress.close()]);
    throw err;
  });
  return {
    port: running.port,
    stop: () =>
      running.stop().finally(async () => {
        tools.close();
        await Promise.all([ownEgress?.close(), platformEgress.close()]);
      }),
    openEventStreams: () => live.hub.streams,
  };
}
