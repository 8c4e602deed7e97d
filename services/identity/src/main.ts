import { startTelemetry } from '@workauto/telemetry';

const stopTelemetry = startTelemetry('identity');
// Loaded after telemetry so its instrumentations see grpc and pg.
const { loadConfig, vars, z, kafkaVars, grpcServiceVars } = await import('@workauto/config');
const { createLogger } = await import('@workauto/logger');
const { installShutdownSignals } = await import('@workauto/grpc');
const { createTransport } = await import('@workauto/events');
const { createIdentityService } = await import('./app.js');
const { providerSchema } = await import('./oauth.js');

const config = loadConfig({
  DATABASE_URL: vars.url(),
  GRPC_HOST: z.string().default('0.0.0.0'),
  GRPC_PORT: vars.port(50051),
  PLATFORM_ADMIN_TOKEN: z.string().min(32, 'must be at least 32 characters'),
  ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
  LOG_LEVEL: vars.logLevel(),
  ...kafkaVars,
  ...grpcServiceVars,
  // JSON: {"google": {"issuer": "https://accounts.google.com", "client_id": "…", "client_secret": "…"}}
  OAUTH_PROVIDERS: z
    .string()
    .default('{}')
    .transform((s, ctx) => {
      try {
        return z.record(z.string(), providerSchema).parse(JSON.parse(s));
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `must be a JSON object of providers: ${(err as Error).message.slice(0, 200)}` });
        return z.NEVER;
      }
    }),
  OAUTH_REDIRECT_BASE_URL: vars.url().default('http://127.0.0.1:8080'),
  OAUTH_ALLOWED_RETURN_ORIGINS: z.string().default('').transform((s) => s.split(',').map((o) => o.trim()).filter(Boolean)),
});
const logger = createLogger('identity', config.LOG_LEVEL);
const transport = createTransport({ brokers: config.KAFKA_BROKERS, clientId: 'identity', logger, partitions: config.KAFKA_TOPIC_PARTITIONS, replicationFactor: config.KAFKA_TOPIC_REPLICATION_FACTOR, retentionMs: config.KAFKA_TOPIC_RETENTION_MS });
const service = await createIdentityService(
  {
    databaseUrl: config.DATABASE_URL,
    host: config.GRPC_HOST,
    port: config.GRPC_PORT,
    callerVerifyKeys: config.CALLER_VERIFY_KEYS, callerSigningKey: config.CALLER_SIGNING_KEY, grpcReflection: config.GRPC_REFLECTION,
    platformAdminToken: config.PLATFORM_ADMIN_TOKEN,
    encryptionKeys: config.ENCRYPTION_KEYS,
    transport,
    oauth: { providers: config.OAUTH_PROVIDERS, redirectBaseUrl: config.OAUTH_REDIRECT_BASE_URL, allowedReturnOrigins: config.OAUTH_ALLOWED_RETURN_ORIGINS },
  },
  logger,
);
installShutdownSignals(logger, async () => {
  await service.stop();
  await transport.close();
  await stopTelemetry();
});
