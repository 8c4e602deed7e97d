/**
 * A process's composition root, written once: config → logger → signal handlers → telemetry → (now
 * grpc and pg may load) → the process's own start (db → events → server → workers). A service's main.ts
 * only says what is its own: its name, its port, its extra variables, and how to start it.
 *
 * This module imports nothing that OpenTelemetry instruments (grpc, pg, http servers): those are
 * imported dynamically after startTelemetry, or their calls would not be traced. Keep it that way.
 */
// First: signals end the process from now on (see early-signals.ts).
import { removeEarlySignalHandlers } from './early-signals.js';
import { ConfigError, grpcServiceVars, kafkaVars, loadConfig, vars, z } from '@workauto/config';
import { installShutdownSignals } from '@workauto/grpc/signals';
import { createLogger, type Logger } from '@workauto/logger';
import { DependencyUnavailableError } from './dependency-error.js';
import type { RunningService, ServiceConfig } from './service.js';

type Env<S extends z.ZodRawShape> = z.infer<z.ZodObject<S>>;

const processEnv = {
  LOG_LEVEL: vars.logLevel(),
  /** How long a start waits for its database and event broker before it exits naming them (5 min). */
  STARTUP_TIMEOUT_MS: vars.milliseconds(5 * 60_000),
};
type ProcessEnv = Env<typeof processEnv>;

/**
 * Runs a process: validated env (its own variables and LOG_LEVEL), logger, signal handlers, telemetry, start; stops
 * on SIGTERM/SIGINT. Exits 1 when the configuration is invalid or the start fails.
 */
export async function runProcess<S extends z.ZodRawShape>(opts: {
  name: string;
  env: S;
  start(env: ProcessEnv & Env<S>, logger: Logger): Promise<{ stop(): Promise<void> }>;
}): Promise<void> {
  let env: ProcessEnv & Env<S>;
  try {
    env = loadConfig({ ...processEnv, ...opts.env }) as ProcessEnv & Env<S>;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // One JSON line like every other, so the log pipeline keeps the reason the pod is crash-looping.
    createLogger(opts.name, 'info').fatal({ reason: 'invalid configuration' }, err.message);
    process.exitCode = 1;
    return;
  }
  let running: { stop(): Promise<void> } | undefined;
  let stopTelemetry: () => Promise<void> = async () => undefined;
  const logger = createLogger(opts.name, env.LOG_LEVEL);
  // Installed first, before telemetry and the start (which may wait long for a database): a SIGTERM
  // then exits 0 at once (nothing serves yet; a migration cut short rolls back). The module loads
  // nothing that OpenTelemetry instruments.
  removeEarlySignalHandlers();
  installShutdownSignals(logger, async () => {
    if (running) await running.stop();
    else logger.info('stopped before the start completed');
    await stopTelemetry();
  });
  // Loaded only now: the OpenTelemetry SDK takes a while to load, and signals are handled by then.
  const { startTelemetry } = await import('@workauto/telemetry');
  stopTelemetry = startTelemetry(opts.name);
  try {
    running = await opts.start(env, logger);
  } catch (err) {
    if (err instanceof DependencyUnavailableError)
      // One line that says it all (no stack: the dependency, not the code, is what failed).
      logger.fatal(
        { dependency: err.dependency, where: err.where, waited_ms: err.waitedMs, reason: err.reason },
        `${opts.name} did not start: ${err.message}`,
      );
    else logger.fatal({ err }, `${opts.name} did not start`);
    await stopTelemetry().catch(() => undefined);
    process.exit(1);
  }
}

/** The variables every gRPC service reads (the one place to add a shared one). */
export function serviceEnv(grpcPort: number) {
  return {
    DATABASE_URL: vars.url(),
    GRPC_HOST: z.string().default('0.0.0.0'),
    GRPC_PORT: vars.port(grpcPort),
    ...kafkaVars,
    ...grpcServiceVars,
    /** Prefix of the topics and consumer groups: several deployments (or test clusters) on one Kafka. */
    KAFKA_NAMESPACE: z
      .string()
      .regex(/^[a-z0-9_.-]*$/, 'lowercase letters, digits, "_", "." and "-" only')
      .default(''),
  };
}

type ServiceEnv = Env<ReturnType<typeof serviceEnv>>;

/**
 * main.ts of a gRPC service: the shared variables plus its own (`env`), the Kafka transport, and
 * `start(config, env, logger)` — which imports the service's app.ts dynamically and calls its
 * create…Service(config, logger) with `config` (the shared ServiceConfig) and its own settings.
 */
export async function runService<S extends z.ZodRawShape = {}>(opts: {
  name: string;
  grpcPort: number;
  env?: S;
  start(config: ServiceConfig, env: ServiceEnv & Env<S>, logger: Logger): Promise<RunningService>;
}): Promise<void> {
  const shape = { ...serviceEnv(opts.grpcPort), ...(opts.env ?? ({} as S)) };
  await runProcess({
    name: opts.name,
    env: shape,
    async start(env, logger) {
      const all = env as unknown as ServiceEnv & Env<S>;
      const { createTransport } = await import('@workauto/events');
      const transport = createTransport({
        brokers: all.KAFKA_BROKERS,
        clientId: opts.name,
        logger,
        partitions: all.KAFKA_TOPIC_PARTITIONS,
        replicationFactor: all.KAFKA_TOPIC_REPLICATION_FACTOR,
        retentionMs: all.KAFKA_TOPIC_RETENTION_MS,
        namespace: all.KAFKA_NAMESPACE,
        createTopics: all.KAFKA_CREATE_TOPICS,
        security: {
          tls: all.KAFKA_TLS,
          tlsCaFile: all.KAFKA_TLS_CA_FILE,
          saslMechanism: all.KAFKA_SASL_MECHANISM,
          saslUsername: all.KAFKA_SASL_USERNAME,
          saslPassword: all.KAFKA_SASL_PASSWORD,
          oauthBearerTokenFile: all.KAFKA_SASL_OAUTHBEARER_TOKEN_FILE,
        },
      });
      try {
        const config: ServiceConfig = {
          databaseUrl: all.DATABASE_URL,
          host: all.GRPC_HOST,
          port: all.GRPC_PORT,
          transport,
          callerVerifyKeys: all.CALLER_VERIFY_KEYS,
          callerSigningKey: all.CALLER_SIGNING_KEY,
          grpcReflection: all.GRPC_REFLECTION,
          startupTimeoutMs: env.STARTUP_TIMEOUT_MS,
        };
        const service = await opts.start(config, all, logger);
        return {
          async stop() {
            await service.stop();
            await transport.close();
          },
        };
      } catch (err) {
        await transport.close().catch(() => undefined);
        throw err;
      }
    },
  });
}
