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
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, grpcServiceVars, kafkaVars, loadConfig, vars, z } from '@workauto/config';
import { installShutdownSignals } from '@workauto/grpc/signals';
import { createLogger, exitAfterLogs, type Logger } from '@workauto/logger';
import { DependencyUnavailableError } from './dependency-error.js';
import { keepNextTickRecord } from './tick-records.js';
import type { RunningService, ServiceConfig } from './service.js';

type Env<S extends z.ZodRawShape> = z.infer<z.ZodObject<S>>;

const processEnv = {
  LOG_LEVEL: vars.logLevel(),
  /** Prometheus metrics on this port (GET /metrics) when set; METRICS_HOST: its address (`::`, every one). */
  METRICS_PORT: vars.optionalPort(),
  METRICS_HOST: vars.host('::'),
  /** Set: traces go to this OTLP collector (the OpenTelemetry SDK reads it and the other OTEL_* variables). */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().optional(),
  /** How long a start waits for its database and event broker before it exits naming them (5 min). */
  STARTUP_TIMEOUT_MS: vars.milliseconds(5 * 60_000),
};
type ProcessEnv = Env<typeof processEnv>;

/** The variables of a process that has migrations (docs/operations.md, Upgrades). */
const migrationEnv = {
  /** false: the process never migrates; it waits until the migrate command (a Job) has applied its migrations. */
  MIGRATE_ON_START: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('true')
    .transform((v) => v === 'true'),
  /** MIGRATE_ON_START=false: how long a start waits for them before exiting (below the startup probe's budget). */
  MIGRATION_WAIT_TIMEOUT_MS: vars.milliseconds(300_000),
};

/**
 * The `migrations` folder beside a module's package (`<package>/migrations` of `<package>/dist/x.js`):
 * a service's own, `migrationsOf(import.meta.url)`, or a library's, `migrationsOf(import.meta.resolve('@workauto/jobs'))`
 * (resolved without loading the library, which would load pg before telemetry).
 */
export function migrationsOf(moduleUrl: string): string {
  return fileURLToPath(new URL('../migrations', moduleUrl));
}

/** How an operator runs this process's migrations: `node services/<name>/dist/main.js migrate`. */
function migrateCommand(): string {
  return `node ${relative(process.cwd(), process.argv[1] ?? 'main.js') || 'main.js'} migrate`;
}

/**
 * `main.js migrate`: applies the process's migrations and exits, 0 when the database has every one,
 * 1 after one fatal line naming the problem. Reads only DATABASE_URL and LOG_LEVEL (and libs/db's
 * MIGRATION_LOCK_TIMEOUT_MS), so a Job needs none of the service's other secrets.
 */
async function runMigrateCommand(name: string, dirs: string[]): Promise<void> {
  let env: { LOG_LEVEL: string; DATABASE_URL: string };
  try {
    env = loadConfig({ ...processEnv, DATABASE_URL: vars.url() });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    createLogger(name, 'info').fatal({ reason: 'invalid configuration' }, err.message);
    return exitAfterLogs(1);
  }
  const logger = createLogger(name, env.LOG_LEVEL);
  // A Job's pod stopped mid-way (a node drained) must not count as done: its transaction rolls back.
  removeEarlySignalHandlers();
  const stop = (signal: NodeJS.Signals) => {
    logger.fatal({ signal }, `migrate stopped by ${signal}: what it had not committed rolled back; run it again`);
    void exitAfterLogs(1);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const { migrate } = await import('./migrate.js');
  await exitAfterLogs(await migrate({ name, databaseUrl: env.DATABASE_URL, dirs, logger }));
}

/**
 * Runs a process: validated env (its own variables and LOG_LEVEL), logger, signal handlers, telemetry, start; stops
 * on SIGTERM/SIGINT. Exits 1 when the configuration is invalid or the start fails.
 */
export async function runProcess<S extends z.ZodRawShape>(opts: {
  name: string;
  env: S;
  /**
   * Its migration folders, in the order they apply, when it has a database (DATABASE_URL): `main.js
   * migrate` applies them, and MIGRATE_ON_START=false waits for them instead of applying them.
   */
  migrations?: string[];
  start(env: ProcessEnv & MigrationEnv & Env<S>, logger: Logger): Promise<{ stop(): Promise<void> }>;
}): Promise<void> {
  // Before the first idle moment: after one, nextTick could lose its fast path for good (tick-records.ts).
  keepNextTickRecord();
  const command = process.argv[2];
  if (command === 'migrate' && opts.migrations) return runMigrateCommand(opts.name, opts.migrations);
  if (command !== undefined) {
    createLogger(opts.name, 'info').fatal(
      { argv: process.argv.slice(2) },
      `unknown command ${JSON.stringify(command)}: run ${opts.migrations ? 'with `migrate` or ' : ''}without arguments`,
    );
    process.exitCode = 2;
    return;
  }
  let env: ProcessEnv & MigrationEnv & Env<S>;
  try {
    env = loadConfig({ ...processEnv, ...(opts.migrations ? migrationEnv : {}), ...opts.env }) as ProcessEnv &
      MigrationEnv &
      Env<S>;
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
    // warn: seen at production's level, it tells why a pod that never served went away (a
    // startup probe's limit, a rollout replaced it).
    else logger.warn('stopped by a signal before the start completed');
    await stopTelemetry();
  });
  // Loaded only now: the OpenTelemetry SDK takes a while to load, and signals are handled by then.
  const { startTelemetry } = await import('@workauto/telemetry');
  stopTelemetry = startTelemetry(opts.name, {
    tracing: Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT),
    metricsPort: env.METRICS_PORT,
    metricsHost: env.METRICS_HOST,
  });
  logger.info(
    { since_process_start_ms: Math.round(performance.now()) },
    'start: configuration read, telemetry started',
  );
  try {
    if (opts.migrations && !env.MIGRATE_ON_START) {
      const { waitUntilMigrated } = await import('./migrate.js');
      await waitUntilMigrated({
        name: opts.name,
        databaseUrl: (env as unknown as { DATABASE_URL: string }).DATABASE_URL,
        dirs: opts.migrations,
        logger,
        timeoutMs: env.MIGRATION_WAIT_TIMEOUT_MS!,
        command: migrateCommand(),
      });
    }
    running = await opts.start(env, logger);
  } catch (err) {
    if ((err as Error).name === 'MigrationsMissingError') {
      // One line that says what to do (run the migrate Job), not a stack.
      logger.fatal((err as Error).message);
      await stopTelemetry().catch(() => undefined);
      return exitAfterLogs(1);
    }
    if (err instanceof DependencyUnavailableError)
      // One line that says it all (no stack: the dependency, not the code, is what failed).
      logger.fatal(
        { dependency: err.dependency, where: err.where, waited_ms: err.waitedMs, reason: err.reason },
        `${opts.name} did not start: ${err.message}`,
      );
    else logger.fatal({ err }, `${opts.name} did not start`);
    await stopTelemetry().catch(() => undefined);
    await exitAfterLogs(1);
  }
}

/** The variables every gRPC service reads (the one place to add a shared one). */
export function serviceEnv(grpcPort: number) {
  return {
    DATABASE_URL: vars.url(),
    // `::`: every address, IPv6 and IPv4, on a dual-stack node; IPv6-only clusters reach it too.
    GRPC_HOST: z.string().default('::'),
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
type MigrationEnv = Partial<Env<typeof migrationEnv>>;

/**
 * main.ts of a gRPC service: the shared variables plus its own (`env`), the Kafka transport, and
 * `start(config, env, logger)` — which imports the service's app.ts dynamically and calls its
 * create…Service(config, logger) with `config` (the shared ServiceConfig) and its own settings.
 */
export async function runService<S extends z.ZodRawShape = Record<never, never>>(opts: {
  name: string;
  grpcPort: number;
  /**
   * The service's migration folders after the outbox's, as its ServiceSpec lists them (checked at
   * start), e.g. `[migrationsOf(import.meta.resolve('@workauto/jobs')), migrationsOf(import.meta.url)]`.
   */
  migrations: string[];
  env?: S;
  start(config: ServiceConfig, env: ServiceEnv & Env<S>, logger: Logger): Promise<RunningService>;
}): Promise<void> {
  const shape = { ...serviceEnv(opts.grpcPort), ...(opts.env ?? ({} as S)) };
  const migrations = [
    migrationsOf(import.meta.resolve('@workauto/events')),
    migrationsOf(import.meta.resolve('@workauto/db')),
    ...opts.migrations,
  ];
  await runProcess({
    name: opts.name,
    env: shape,
    migrations,
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
          tlsCertFile: all.KAFKA_TLS_CERT_FILE,
          tlsKeyFile: all.KAFKA_TLS_KEY_FILE,
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
          migrateOnStart: env.MIGRATE_ON_START !== false,
          declaredMigrations: migrations,
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
