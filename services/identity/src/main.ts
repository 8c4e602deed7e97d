import { startTelemetry } from '@workauto/telemetry';

const stopTelemetry = startTelemetry('identity');
// Loaded after telemetry so its instrumentations see grpc and pg.
const { loadConfig, vars, z } = await import('@workauto/config');
const { createLogger } = await import('@workauto/logger');
const { installShutdownSignals } = await import('@workauto/grpc');
const { createIdentityService } = await import('./app.js');

const config = loadConfig({
  DATABASE_URL: vars.url(),
  GRPC_HOST: z.string().default('0.0.0.0'),
  GRPC_PORT: vars.port(50051),
  PLATFORM_ADMIN_TOKEN: z.string().min(32, 'must be at least 32 characters'),
  ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
  LOG_LEVEL: vars.logLevel(),
});
const logger = createLogger('identity', config.LOG_LEVEL);
const service = await createIdentityService(
  {
    databaseUrl: config.DATABASE_URL,
    host: config.GRPC_HOST,
    port: config.GRPC_PORT,
    platformAdminToken: config.PLATFORM_ADMIN_TOKEN,
    encryptionKeys: config.ENCRYPTION_KEYS,
  },
  logger,
);
installShutdownSignals(logger, async () => {
  await service.stop();
  await stopTelemetry();
});
