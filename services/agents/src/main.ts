import { vars, z } from '@workauto/config';
import { migrationsOf, runService } from '@workauto/service/main';

await runService({
  name: 'agents',
  grpcPort: 50057,
  // The migrate command's folders, as app.ts's ServiceSpec lists them (the start checks they match).
  migrations: [migrationsOf(import.meta.resolve('@workauto/jobs')), migrationsOf(import.meta.url)],
  env: {
    ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
    // As the official SDKs take them: OpenAI's includes /v1, Anthropic's does not.
    OPENAI_BASE_URL: vars.url().default('https://api.openai.com/v1'),
    ANTHROPIC_BASE_URL: vars.url().default('https://api.anthropic.com'),
    AGENT_PROBE_TIMEOUT_MS: vars.milliseconds(10_000),
    AGENT_PROVIDER_TIMEOUT_MS: vars.milliseconds(60_000),
    AGENT_PROVIDER_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
    // The platform's own keys: runs of tenants without a key of their own (else they fail provider_auth).
    OPENAI_API_KEY: z.string().min(1).optional(),
    ANTHROPIC_API_KEY: z.string().min(1).optional(),
    AGENT_PLATFORM_FEE_BPS: z.coerce.number().int().min(0).max(100_000).default(0),
    // The services whose tools runs call (as actor_type agent): they must trust CALLER_SIGNING_KEY's public key.
    NOTES_TASKS_ADDR: vars.address().optional(),
    CRM_PIPELINES_ADDR: vars.address().optional(),
    CALENDAR_ADDR: vars.address().optional(),
    APPS_ADDR: vars.address().optional(),
    AGENT_RUN_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(8),
    AGENT_TENANT_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(4),
    AGENT_RUN_LEASE_MS: vars.milliseconds(30_000),
    AGENT_RUN_HEARTBEAT_MS: z.coerce.number().int().min(100).max(5_000).default(2_000),
    AGENT_SCHEDULER_POLL_MS: vars.milliseconds(1_000),
    // Live run events: a comment when a stream had nothing to say for this long (proxies close
    // quiet connections after 30–60 s), and the longest stream (below the route's gateway
    // deadline of 630 s); the client then reconnects with Last-Event-ID.
    AGENT_EVENTS_HEARTBEAT_MS: z.coerce.number().int().min(1_000).max(60_000).default(15_000),
    AGENT_EVENTS_MAX_STREAM_MS: z.coerce.number().int().min(10_000).max(600_000).default(300_000),
  },
  // Imported here, after telemetry started, so its instrumentations see grpc and pg. The egress
  // policy of tenants' base URLs reads EGRESS_ALLOW_PRIVATE / EGRESS_ALLOWED_CIDRS and fails the
  // start with a message naming a bad one.
  start: async (config, env, logger) =>
    (await import('./app.js')).createAgentsService(
      {
        ...config,
        encryptionKeys: env.ENCRYPTION_KEYS,
        egress: (await import('@workauto/egress')).EgressPolicy.fromEnv(),
        providers: {
          openaiBaseUrl: env.OPENAI_BASE_URL,
          anthropicBaseUrl: env.ANTHROPIC_BASE_URL,
          probeTimeoutMs: env.AGENT_PROBE_TIMEOUT_MS,
          chatTimeoutMs: env.AGENT_PROVIDER_TIMEOUT_MS,
          chatMaxRetries: env.AGENT_PROVIDER_MAX_RETRIES,
        },
        platformKeys: { openai: env.OPENAI_API_KEY, anthropic: env.ANTHROPIC_API_KEY },
        platformFeeBps: env.AGENT_PLATFORM_FEE_BPS,
        downstreams: {
          notes_tasks: env.NOTES_TASKS_ADDR,
          crm_pipelines: env.CRM_PIPELINES_ADDR,
          calendar: env.CALENDAR_ADDR,
          apps: env.APPS_ADDR,
        },
        runs: {
          concurrency: env.AGENT_RUN_CONCURRENCY,
          tenantConcurrency: env.AGENT_TENANT_CONCURRENCY,
          leaseMs: env.AGENT_RUN_LEASE_MS,
          heartbeatMs: env.AGENT_RUN_HEARTBEAT_MS,
          schedulerPollMs: env.AGENT_SCHEDULER_POLL_MS,
        },
        runEvents: { heartbeatMs: env.AGENT_EVENTS_HEARTBEAT_MS, maxStreamMs: env.AGENT_EVENTS_MAX_STREAM_MS },
      },
      logger,
    ),
});
