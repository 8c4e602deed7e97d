import { migrationsOf, runService } from '@workauto/service/main';
import { z } from '@workauto/config';
import { egressVars } from '@workauto/egress';
import { webhookEnv } from './settings.js';

await runService({
  name: 'webhooks',
  grpcPort: 50055,
  // The migrate command's folders, as app.ts's ServiceSpec lists them (the start checks they match).
  migrations: [migrationsOf(import.meta.resolve('@workauto/jobs')), migrationsOf(import.meta.url)],
  env: {
    ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
    ...egressVars,
    ...webhookEnv,
  },
  start: async (config, env, logger) => {
    // Imported here, after telemetry started, so its instrumentations see grpc, pg and http.
    const { createWebhooksService, settingsFromEnv } = await import('./index.js');
    const { EgressPolicy } = await import('@workauto/egress');
    return createWebhooksService(
      {
        ...config,
        encryptionKeys: env.ENCRYPTION_KEYS,
        settings: settingsFromEnv(env),
        // EGRESS_ALLOW_PRIVATE, EGRESS_ALLOWED_CIDRS and the proxy variables (HTTPS_PROXY, NO_PROXY).
        egress: EgressPolicy.fromEnv(),
      },
      logger,
    );
  },
});
