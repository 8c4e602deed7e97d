/**
 * The start-up every gRPC service shares, so each service's app.ts only says what is its own:
 * database pool → (waits for the database) outbox and own migrations → gRPC server with its
 * handlers → consumers → outbox relay → listen → SERVING → workers. Stopping runs it backwards
 * (workers first, then the server drains while events can still be published, the pool last); a
 * start that fails half-way closes what it had opened.
 */
import { resolve } from 'node:path';
import { createPool, pendingMigrations, runMigrations, type Pool } from '@workauto/db';
import {
  LocalTransport,
  OUTBOX_MIGRATIONS,
  OutboxRelay,
  type EventTransport,
  type Subscription,
} from '@workauto/events';
import {
  CallerSigner,
  CallerVerifier,
  GrpcServer,
  Resources,
  type Handlers,
  type UnaryServiceDefinition,
} from '@workauto/grpc';
import type { Logger } from '@workauto/logger';
import { untilAvailable, untilDatabaseAnswers, watchDatabase, type WaitOptions } from './database.js';
import { WorkerSupervisor, type Worker } from './workers.js';

/**
 * gRPC health names. Liveness says the process works (it stays SERVING through a database outage,
 * so an outage never restarts pods); readiness ('' and the service's own name) follows the database.
 */
export const HEALTH = { liveness: 'liveness', readiness: '' } as const;

/** What main.ts, make dev's stack and the tests give every service. */
export interface ServiceConfig {
  databaseUrl: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Event streams (Kafka, or in-process for one-process runs); a private in-process one by default. */
  transport?: EventTransport;
  /** How often the database is pinged for the readiness status (default 5 s). */
  healthCheckMs?: number;
  /** How long the start waits for an unreachable database or event broker (default: until they answer). */
  databaseWait?: WaitOptions;
  /** CALLER_VERIFY_KEYS: the public keys (JWKS JSON) whose signed caller tokens this service accepts. */
  callerVerifyKeys: string;
  /** CALLER_SIGNING_KEY: this service's own private JWK, only if it calls other services on a caller's behalf. */
  callerSigningKey?: string | undefined;
  /** GRPC_REFLECTION: serve gRPC reflection (off by default). */
  grpcReflection?: boolean | undefined;
  /**
   * MIGRATE_ON_START (default true). false: the start only checks that every migration is applied
   * (main.ts waited for the migrate command) and fails naming the missing ones.
   */
  migrateOnStart?: boolean;
  /** The migration folders main.ts declares for its migrate command: the start fails if they differ from the spec's. */
  declaredMigrations?: string[];
  /** Workers: grace for in-flight work on shutdown (10 s) and silence after which a loop is stuck (60 s). */
  workerGraceMs?: number;
  workerStuckAfterMs?: number;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

/** What a service's workers are built from. */
export interface WorkerDeps {
  pool: Pool;
  transport: EventTransport;
  logger: Logger;
}

export interface ServiceSpec<S extends UnaryServiceDefinition> {
  /** e.g. notes-tasks: log lines, the outbox relay's source, the pool's application_name. */
  name: string;
  /** ErrorInfo domain of its errors, e.g. notes.workauto. */
  errorDomain: string;
  /** Under proto/, for reflection: workauto/<pkg>/v1/<pkg>.proto. */
  protoFile: string;
  /** Fully qualified gRPC service name (readiness is reported under it too). */
  grpcService: string;
  definition: S;
  /** Migration folders applied after the shared outbox tables: the service's own, and e.g. JOBS_MIGRATIONS. */
  migrations: string | string[];
  handlers(pool: Pool): Handlers<S>;
  /** Event consumers the service runs (started before it serves). */
  consumers?(pool: Pool, transport: EventTransport): Promise<Subscription[]>;
  /** Background loops (job workers, probes): started once the service serves, stopped first. */
  workers?(deps: WorkerDeps): Worker[];
}

export async function startService<S extends UnaryServiceDefinition>(
  spec: ServiceSpec<S>,
  config: ServiceConfig,
  logger: Logger,
): Promise<RunningService> {
  // Key problems stop the start before anything is opened, with a message that says what to set.
  const callerVerifier = new CallerVerifier(config.callerVerifyKeys);
  const callerSigner = config.callerSigningKey
    ? new CallerSigner(config.callerSigningKey, { issuer: spec.name })
    : undefined;
  const resources = new Resources();
  return resources.start(async () => {
    const pool = resources.add(createPool(config.databaseUrl, { applicationName: spec.name }), (p) => p.end());
    const migrations = [OUTBOX_MIGRATIONS, ...[spec.migrations].flat()];
    if (config.declaredMigrations && config.declaredMigrations.map((d) => resolve(d)).join() !== migrations.join())
      throw new Error(
        `main.ts declares the migrations ${config.declaredMigrations.join(', ')} but ${spec.name} applies ${migrations.join(', ')}: ` +
          `list the same folders in runService's migrations (the migrate command applies those)`,
      );
    const applied = await untilDatabaseAnswers(
      config.databaseUrl,
      logger,
      async () => {
        if (config.migrateOnStart !== false) return runMigrations(pool, migrations, { logger });
        const missing = await pendingMigrations(pool, migrations);
        if (missing.length)
          throw new Error(
            `MIGRATE_ON_START=false and migrations ${missing.join(', ')} are not applied: run the migrate command first`,
          );
        return [];
      },
      config.databaseWait,
    );
    if (applied.length) logger.info({ applied }, 'migrations applied');
    const server = new GrpcServer({
      name: spec.name,
      errorDomain: spec.errorDomain,
      logger,
      protoFiles: [spec.protoFile],
      callerVerifier,
      callerSigner,
      reflection: config.grpcReflection,
    });
    server.add(spec.grpcService, spec.definition, spec.handlers(pool));
    const transport = config.transport ?? new LocalTransport();
    for (const consumer of (await spec.consumers?.(pool, transport)) ?? []) resources.add(consumer, (c) => c.stop());
    // Creating the topics needs Kafka: wait for it too. Every failure counts as transient (kafkajs
    // reports a broker that stays away as non-retriable); the log line says why it still waits.
    const relay = await untilAvailable(
      { dependency: 'event broker', where: 'KAFKA_BROKERS', hint: 'check that Kafka is reachable' },
      logger,
      () => OutboxRelay.start({ pool, transport, source: spec.name, logger }),
      () => true,
      config.databaseWait,
    );
    resources.add(relay, (r) => r.stop());
    resources.add(server, (s) => s.shutdown());
    const port = await server.listen(config.host, config.port);
    server.setHealth(HEALTH.liveness, 'SERVING');
    server.markServing();
    resources.add(
      watchDatabase(pool, config.healthCheckMs ?? 5_000, (reachable) => {
        if (reachable) {
          server.markServing();
          logger.info('database reachable again; SERVING');
        } else {
          server.markNotServing();
          logger.warn(
            'database unreachable; readiness NOT_SERVING until it answers again (check DATABASE_URL and the server); liveness stays SERVING',
          );
        }
      }),
      (timer) => clearInterval(timer),
    );
    const workers = spec.workers?.({ pool, transport, logger }) ?? [];
    const supervisor = new WorkerSupervisor(
      workers,
      logger,
      (stuck) => server.setHealth(HEALTH.liveness, stuck ? 'NOT_SERVING' : 'SERVING'),
      {
        ...(config.workerGraceMs !== undefined ? { graceMs: config.workerGraceMs } : {}),
        ...(config.workerStuckAfterMs !== undefined ? { stuckAfterMs: config.workerStuckAfterMs } : {}),
      },
    );
    resources.add(supervisor, (s) => s.stop());
    supervisor.start();
    logger.info({ port, workers: workers.map((w) => w.name) }, `${spec.name} serving`);
    return { port, stop: () => resources.close() };
  });
}
