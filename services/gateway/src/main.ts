import { vars, z } from '@workauto/config';
import { migrationsOf, runProcess } from '@workauto/service/main';
import { isCidr } from './cidr.js';
import { corsAllowedOriginsVar } from './cors.js';
import { publicBaseUrlVar } from './public-url.js';

/** Downstream key (proto package segment) → its address variable. */
const DOWNSTREAM_VARS = {
  identity: 'IDENTITY_ADDR',
  notes_tasks: 'NOTES_TASKS_ADDR',
  crm_pipelines: 'CRM_PIPELINES_ADDR',
  calendar: 'CALENDAR_ADDR',
  agents: 'AGENTS_ADDR',
  apps: 'APPS_ADDR',
  webhooks: 'WEBHOOKS_ADDR',
} as const;

await runProcess({
  name: 'gateway',
  // Its Idempotency-Key table: `main.js migrate` applies it; MIGRATE_ON_START=false waits for it.
  migrations: [migrationsOf(import.meta.url)],
  env: {
    PORT: vars.port(8080),
    DATABASE_URL: vars.url(),
    ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
    // `::`: every address, IPv6 and IPv4, on a dual-stack node; IPv6-only clusters reach it too.
    HOST: z.string().default('::'),
    // Above every common load balancer's idle timeout (60 s), so the gateway never closes a connection
    // the balancer is about to reuse (docs/operations.md, "Keep-alive").
    HTTP_KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(290_000).default(65_000),
    AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
    RATE_LIMIT_PER_MINUTE: z.coerce.number().int().positive().default(600),
    RATE_LIMIT_PER_TENANT_PER_MINUTE: z.coerce.number().int().positive().optional(),
    GATEWAY_TENANT_CONCURRENCY: z.coerce.number().int().positive().default(128),
    DOWNSTREAM_DEADLINE_MS: vars.milliseconds(5_000),
    CALLER_SIGNING_KEY: vars.callerSigningKey(),
    TRUSTED_PROXIES: z
      .string()
      .default('')
      .transform((text, ctx) => {
        const list = text
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        for (const entry of list)
          if (!isCidr(entry))
            ctx.addIssue({ code: 'custom', message: `${entry} is not an IP address or CIDR (like 10.0.0.0/8)` });
        return list;
      }),
    CORS_ALLOWED_ORIGINS: corsAllowedOriginsVar(),
    PUBLIC_BASE_URL: publicBaseUrlVar(),
    ...Object.fromEntries(Object.values(DOWNSTREAM_VARS).map((v) => [v, vars.address().optional()])),
  },
  async start(config, logger) {
    const env = config as unknown as Record<string, string | undefined>;
    const downstreams = Object.fromEntries(
      Object.entries(DOWNSTREAM_VARS).flatMap(([key, variable]) => (env[variable] ? [[key, env[variable]]] : [])),
    );
    // Imported here, after telemetry started, so its instrumentations see http, grpc and pg.
    const { createGateway } = await import('./app.js');
    const gateway = await createGateway({
      startupTimeoutMs: config.STARTUP_TIMEOUT_MS,
      logger,
      downstreams,
      databaseUrl: config.DATABASE_URL,
      encryptionKeys: config.ENCRYPTION_KEYS,
      authCacheTtlMs: config.AUTH_CACHE_TTL_MS,
      rateLimitPerMinute: config.RATE_LIMIT_PER_MINUTE,
      tenantConcurrency: config.GATEWAY_TENANT_CONCURRENCY,
      ...(config.RATE_LIMIT_PER_TENANT_PER_MINUTE
        ? { tenantRateLimitPerMinute: config.RATE_LIMIT_PER_TENANT_PER_MINUTE }
        : {}),
      deadlineMs: config.DOWNSTREAM_DEADLINE_MS,
      keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      callerSigningKey: config.CALLER_SIGNING_KEY,
      trustedProxies: config.TRUSTED_PROXIES,
      corsAllowedOrigins: config.CORS_ALLOWED_ORIGINS,
      ...(config.PUBLIC_BASE_URL ? { publicBaseUrl: config.PUBLIC_BASE_URL } : {}),
    });
    const port = await gateway.listen(config.HOST, config.PORT);
    logger.info({ port, downstreams: Object.keys(downstreams) }, 'gateway listening');
    return { stop: () => gateway.close() };
  },
});
