import { vars } from '@workauto/config';
import { EgressPolicy, egressVars } from '@workauto/egress';
import { runService } from '@workauto/service/main';
import { z } from '@workauto/config';

await runService({
  name: 'apps',
  grpcPort: 50056,
  env: {
    ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
    APPS_PROBE_INTERVAL: vars.duration('5m').refine((ms) => ms >= 1_000, 'must be at least 1s'),
    APPS_TOOL_CALL_TIMEOUT_MS: vars.milliseconds(60_000),
    ...egressVars,
  },
  start: async (config, env, logger) =>
    // Imported here, after telemetry started, so its instrumentations see grpc and pg.
    (await import('./app.js')).createAppsService(
      {
        ...config,
        encryptionKeys: env.ENCRYPTION_KEYS,
        egress: new EgressPolicy({ allowPrivate: env.EGRESS_ALLOW_PRIVATE, allowedCidrs: env.EGRESS_ALLOWED_CIDRS }),
        probeIntervalMs: env.APPS_PROBE_INTERVAL,
        toolCallTimeoutMs: env.APPS_TOOL_CALL_TIMEOUT_MS,
      },
      logger,
    ),
});
