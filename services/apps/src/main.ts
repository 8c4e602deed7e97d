import { oauthRedirectVars, vars, z } from '@workauto/config';
import { migrationsOf, runService } from '@workauto/service/main';

await runService({
  name: 'apps',
  grpcPort: 50056,
  // The migrate command's folders, as app.ts's ServiceSpec lists them (the start checks they match).
  migrations: [migrationsOf(import.meta.resolve('@workauto/jobs')), migrationsOf(import.meta.url)],
  env: {
    ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
    APPS_PROBE_INTERVAL: vars.duration('5m').refine((ms) => ms >= 1_000, 'must be at least 1s'),
    APPS_TOOL_CALL_TIMEOUT_MS: vars.milliseconds(60_000),
    // A result is returned in one gRPC message, which callers accept up to 4 MiB.
    APPS_TOOL_RESULT_MAX_BYTES: z.coerce
      .number({ error: 'expected a number of bytes' })
      .int('expected a whole number of bytes')
      .min(1024, 'must be at least 1024')
      .max(4 * 1024 * 1024, 'must be at most 4194304 (a result travels in one 4 MiB gRPC message)')
      .default(1024 * 1024),
    // The callback of apps' OAuth consents and where they may end, as identity's (docs/apps.md "OAuth").
    ...oauthRedirectVars,
  },
  start: async (config, env, logger) => {
    // Imported here, after telemetry started, so its instrumentations see grpc and pg (libs/egress
    // loads both through @workauto/grpc). EGRESS_ALLOW_PRIVATE / EGRESS_ALLOWED_CIDRS are read and
    // checked by EgressPolicy.fromEnv: a bad value fails the start with a message naming it.
    const { EgressPolicy } = await import('@workauto/egress');
    const { createAppsService } = await import('./app.js');
    return createAppsService(
      {
        ...config,
        encryptionKeys: env.ENCRYPTION_KEYS,
        egress: EgressPolicy.fromEnv(),
        probeIntervalMs: env.APPS_PROBE_INTERVAL,
        toolCallTimeoutMs: env.APPS_TOOL_CALL_TIMEOUT_MS,
        toolResultMaxBytes: env.APPS_TOOL_RESULT_MAX_BYTES,
        oauth: {
          redirectBaseUrl: env.OAUTH_REDIRECT_BASE_URL,
          allowedReturnOrigins: env.OAUTH_ALLOWED_RETURN_ORIGINS,
        },
      },
      logger,
    );
  },
});
