import { startTelemetry } from '@workauto/telemetry';

const stopTelemetry = startTelemetry('notes-tasks');
// Loaded after telemetry so its instrumentations see grpc and pg.
const { loadConfig, vars, z, kafkaVars, grpcServiceVars } = await import('@workauto/config');
const { createLogger } = await import('@workauto/logger');
const { installShutdownSignals } = await import('@workauto/grpc');
const { createTransport } = await import('@workauto/events');
const { createNotesTasksService } = await import('./app.js');

const config = loadConfig({
  DATABASE_URL: vars.url(),
  GRPC_HOST: z.string().default('0.0.0.0'),
  GRPC_PORT: vars.port(50052),
  LOG_LEVEL: vars.logLevel(),
  ...kafkaVars,
  ...grpcServiceVars,
});
const logger = createLogger('notes-tasks', config.LOG_LEVEL);
const transport = createTransport({ brokers: config.KAFKA_BROKERS, clientId: 'notes-tasks', logger, partitions: config.KAFKA_TOPIC_PARTITIONS, replicationFactor: config.KAFKA_TOPIC_REPLICATION_FACTOR, retentionMs: config.KAFKA_TOPIC_RETENTION_MS });
const service = await createNotesTasksService({ databaseUrl: config.DATABASE_URL, host: config.GRPC_HOST, port: config.GRPC_PORT, transport, callerVerifyKeys: config.CALLER_VERIFY_KEYS, callerSigningKey: config.CALLER_SIGNING_KEY, grpcReflection: config.GRPC_REFLECTION }, logger);
installShutdownSignals(logger, async () => {
  await service.stop();
  await transport.close();
  await stopTelemetry();
});
