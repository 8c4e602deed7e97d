import { ensureDatabase } from '@workauto/db';
import { createLogger, type Logger } from '@workauto/logger';
import { createIdentityService, type OAuthSettings, type RunningService } from '@workauto/identity';
import { createGateway, type Gateway, type GatewayOptions } from '@workauto/gateway';
import { createAppsService, type AppsConfig } from '@workauto/apps';
import { createCalendarService } from '@workauto/calendar';
import { createCrmPipelinesService } from '@workauto/crm-pipelines';
import { EgressPolicy, type EgressPolicyOptions } from '@workauto/egress';
import { createNotesTasksService } from '@workauto/notes-tasks';
import { createWebhooksService, settingsFromEnv, webhookEnv, type WebhookSettings } from '@workauto/webhooks';
import { loadConfig } from '@workauto/config';
import { createAgentsService, type AgentsConfig } from '@workauto/agents';
import { createTransport, type EventTransport } from '@workauto/events';
import { generateCallerKeys, mergeVerifyKeys, type CallerKeys } from '@workauto/grpc';

export interface StackOptions {
  /** postgres://… of a server; each service gets its own database on it. */
  databaseServerUrl: string;
  /** Prefix of the database names (`workauto` for make dev; a random one per test file). */
  databasePrefix: string;
  platformAdminToken: string;
  encryptionKeys: string;
  /** The gateway signs each call's caller identity with signingKey; every service verifies with verifyKeys. */
  callerKeys: CallerKeys;
  gatewayHost?: string;
  /** 0 picks a free port. */
  gatewayPort?: number;
  logger?: Logger;
  /** Gateway settings; downstreams given here replace the stack's own address of those services (tests of hung services). */
  gatewayOptions?: Partial<
    Pick<
      GatewayOptions,
      | 'authCacheTtlMs'
      | 'rateLimitPerMinute'
      | 'trustedProxies'
      | 'deadlineMs'
      | 'downstreamOptions'
      | 'downstreams'
      | 'corsAllowedOrigins'
      | 'publicBaseUrl'
      | 'tenantConcurrency'
      | 'tenantRateLimitPerMinute'
      | 'tenantStreams'
      | 'streamIdleTimeoutMs'
    >
  >;
  /** Identity providers for OAuth consent (none by default). */
  oauth?: OAuthSettings;
  /** Kafka brokers (host:port,…); unset = the in-process transport shared by all services. */
  kafkaBrokers?: string | undefined;
  /** Prefix of topics and consumer groups (tests run stacks side by side on one broker). */
  kafkaNamespace?: string;
  /** How often services ping their database for their health status (default 5 s). */
  healthCheckMs?: number;
  /** The webhooks service: settings over the WEBHOOK_* environment, and its egress policy (default devEgressPolicy()). */
  webhooks?: { settings?: Partial<WebhookSettings>; egress?: EgressPolicy };
  /** The egress policy of calls to tenants' URLs (MCP servers, agent configs' base URLs); default devEgressPolicy(). */
  egress?: EgressPolicyOptions;
  /**
   * The apps service's probe schedule and timeouts (tests shorten them), and where its OAuth
   * consents come back and may end (default: identity's `oauth` settings, as OAUTH_* are for both).
   */
  apps?: { probeIntervalMs?: number; probeTimeoutMs?: number; toolCallTimeoutMs?: number; oauth?: AppsConfig['oauth'] };
  /** The agents service's provider URLs, platform keys, fee and run settings (make dev: from the environment). */
  agents?: Pick<AgentsConfig, 'providers' | 'platformKeys' | 'platformFeeBps' | 'runs'>;
}

/**
 * make dev's egress: private addresses and plain http allowed (receivers and MCP servers on
 * loopback) unless the environment says otherwise (docs/operations.md "Outbound calls to tenant URLs"); EGRESS_ALLOWED_CIDRS as set.
 */
export function devEgressPolicy(env: Record<string, string | undefined> = process.env): EgressPolicy {
  return EgressPolicy.fromEnv({ ...env, EGRESS_ALLOW_PRIVATE: env.EGRESS_ALLOW_PRIVATE ?? 'true' });
}

export interface Stack {
  /** http://host:port of the gateway. */
  url: string;
  transport: EventTransport;
  gateway: Gateway;
  services: Record<string, RunningService>;
  /** Stops one service (tests of readiness and outages). */
  stopService(name: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts every service on loopback (gRPC on free ports), each with its own database, and the
 * gateway in front of them: the whole product in one process, for make dev and end-to-end tests.
 */
export async function startStack(opts: StackOptions): Promise<Stack> {
  const logger = opts.logger ?? createLogger('workauto');
  const db = (service: string) => ensureDatabase(opts.databaseServerUrl, `${opts.databasePrefix}_${service}`);
  const host = '127.0.0.1';
  const services: Record<string, RunningService> = {};
  const transport = createTransport({
    brokers: opts.kafkaBrokers,
    clientId: 'workauto',
    logger,
    ...(opts.kafkaNamespace ? { namespace: opts.kafkaNamespace } : {}),
  });
  // agents calls notes-tasks, crm-pipelines, calendar and apps as a run's agent, signed with its own key.
  const agentsKeys = generateCallerKeys('agents');
  // What every service gets: loopback, a free port, the shared transport, the signers' public keys.
  const common = {
    host,
    port: 0,
    transport,
    callerVerifyKeys: mergeVerifyKeys(opts.callerKeys.verifyKeys, agentsKeys.verifyKeys),
    ...(opts.healthCheckMs ? { healthCheckMs: opts.healthCheckMs } : {}),
  };
  try {
    // Keys are the proto package segments (workauto.<key>.v1): the gateway routes by them.
    services.identity = await createIdentityService(
      {
        ...common,
        databaseUrl: await db('identity'),
        platformAdminToken: opts.platformAdminToken,
        encryptionKeys: opts.encryptionKeys,
        ...(opts.oauth ? { oauth: opts.oauth } : {}),
      },
      logger.child({ component: 'identity' }),
    );
    services.crm_pipelines = await createCrmPipelinesService(
      { ...common, databaseUrl: await db('crm_pipelines') },
      logger.child({ component: 'crm-pipelines' }),
    );
    services.notes_tasks = await createNotesTasksService(
      { ...common, databaseUrl: await db('notes_tasks') },
      logger.child({ component: 'notes-tasks' }),
    );
    services.webhooks = await createWebhooksService(
      {
        ...common,
        databaseUrl: await db('webhooks'),
        encryptionKeys: opts.encryptionKeys,
        settings: { ...settingsFromEnv(loadConfig(webhookEnv)), ...opts.webhooks?.settings },
        egress: opts.webhooks?.egress ?? devEgressPolicy(),
      },
      logger.child({ component: 'webhooks' }),
    );
    const appsEgress = opts.egress ? new EgressPolicy(opts.egress) : devEgressPolicy();
    const apps = await createAppsService(
      {
        ...common,
        databaseUrl: await db('apps'),
        encryptionKeys: opts.encryptionKeys,
        egress: appsEgress,
        ...(opts.oauth
          ? {
              oauth: {
                redirectBaseUrl: opts.oauth.redirectBaseUrl,
                allowedReturnOrigins: opts.oauth.allowedReturnOrigins,
              },
            }
          : {}),
        ...opts.apps,
      },
      logger.child({ component: 'apps' }),
    );
    services.apps = { port: apps.port, stop: () => apps.stop().finally(() => appsEgress.close()) };
    services.calendar = await createCalendarService(
      { ...common, databaseUrl: await db('calendar') },
      logger.child({ component: 'calendar' }),
    );
    // Runs call notes-tasks, crm-pipelines, calendar and apps as their agent: started after them.
    const address = (name: string) => `${host}:${services[name]!.port}`;
    const agentsEgress = opts.egress ? new EgressPolicy(opts.egress) : devEgressPolicy();
    const agents = await createAgentsService(
      {
        ...common,
        egress: agentsEgress,
        databaseUrl: await db('agents'),
        encryptionKeys: opts.encryptionKeys,
        callerSigningKey: agentsKeys.signingKey,
        downstreams: {
          notes_tasks: address('notes_tasks'),
          crm_pipelines: address('crm_pipelines'),
          calendar: address('calendar'),
          apps: address('apps'),
        },
        ...opts.agents,
      },
      logger.child({ component: 'agents' }),
    ).catch(async (err: unknown) => {
      await agentsEgress.close();
      throw err;
    });
    services.agents = { port: agents.port, stop: () => agents.stop().finally(() => agentsEgress.close()) };
    const downstreams = Object.fromEntries(Object.entries(services).map(([name, s]) => [name, `${host}:${s.port}`]));
    const gateway = await createGateway({
      logger: logger.child({ component: 'gateway' }),
      databaseUrl: await db('gateway'),
      encryptionKeys: opts.encryptionKeys,
      callerSigningKey: opts.callerKeys.signingKey,
      ...opts.gatewayOptions,
      downstreams: { ...downstreams, ...opts.gatewayOptions?.downstreams },
    });
    const gatewayHost = opts.gatewayHost ?? host;
    const port = await gateway.listen(gatewayHost, opts.gatewayPort ?? 0);
    const stopped = new Set<string>();
    const stopService = async (name: string) => {
      if (stopped.has(name)) return;
      stopped.add(name);
      await services[name]?.stop();
    };
    return {
      url: `http://${gatewayHost === '0.0.0.0' ? '127.0.0.1' : gatewayHost}:${port}`,
      transport,
      gateway,
      services,
      stopService,
      async stop() {
        await gateway.close();
        for (const name of Object.keys(services).reverse()) await stopService(name);
        await transport.close();
      },
    };
  } catch (err) {
    for (const s of Object.values(services).reverse()) await s.stop().catch(() => undefined);
    await transport.close();
    throw err;
  }
}
