import { oauthRedirectVars, z } from '@workauto/config';
import { migrationsOf, runService } from '@workauto/service/main';
// Loads openid-client, which uses fetch (not an instrumented module), so it may come before telemetry.
import { providerSchema } from './oauth.js';

await runService({
  name: 'identity',
  grpcPort: 50051,
  // The migrate command's folders, as app.ts's ServiceSpec lists them (the start checks they match).
  migrations: [migrationsOf(import.meta.url)],
  env: {
    PLATFORM_ADMIN_TOKEN: z.string().min(32, 'must be at least 32 characters'),
    ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
    // JSON: {"google": {"issuer": "https://accounts.google.com", "client_id": "…", "client_secret": "…"}}
    OAUTH_PROVIDERS: z
      .string()
      .default('{}')
      .transform((s, ctx) => {
        try {
          return z.record(z.string(), providerSchema).parse(JSON.parse(s));
        } catch (err) {
          ctx.addIssue({
            code: 'custom',
            message: `must be a JSON object of providers: ${(err as Error).message.slice(0, 200)}`,
          });
          return z.NEVER;
        }
      }),
    ...oauthRedirectVars,
    // How long gateways may authenticate writes from their cache; revocations are answered this long after they commit.
    AUTH_WRITE_LEASE_MS: z.coerce.number().int().min(0).max(5_000).default(500),
  },
  start: async (config, env, logger) =>
    // Imported here, after telemetry started, so its instrumentations see grpc and pg.
    (await import('./app.js')).createIdentityService(
      {
        ...config,
        platformAdminToken: env.PLATFORM_ADMIN_TOKEN,
        authWriteLeaseMs: env.AUTH_WRITE_LEASE_MS,
        encryptionKeys: env.ENCRYPTION_KEYS,
        oauth: {
          providers: env.OAUTH_PROVIDERS,
          redirectBaseUrl: env.OAUTH_REDIRECT_BASE_URL,
          allowedReturnOrigins: env.OAUTH_ALLOWED_RETURN_ORIGINS,
        },
      },
      logger,
    ),
});
