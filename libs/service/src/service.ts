/**
 * The start-up every gRPC service shares, so each service's app.ts only says what is its own:
 * database pool → (waits for the database) outbox and own migrations → gRPC server with its
 * handlers → consumers → outbox relay → listen → SERVING → workers. Stopping runs it backwards
 * (workers first, then the server drains while events can still be published, the pool last); a
 * start that fails half-way closes what it had opened.
 */
import { resolve } from 'node:path';
import {
  IDEMPOTENCY_MIGRATIONS,
  createPool,
  deleteExpiredIdempotencyRecords,
  iterateForTenant,
  pendingMigrations,
  runForTenant,
  runMigrations,
  type Pool,
} from '@workauto/db';
import {
  LocalTransport,
  OUTBOX_MIGRATIONS,
  OutboxRelay,
  isRetriableKafkaError,
  type EventTransport,
  type Subscription,
} from '@workauto/events';
import {
  CallerSigner,
  CallerVerifier,
  GrpcServer,
  type CallContext,
  Resources,
  type GrpcServerOptions,
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
  /**
   * STARTUP_TIMEOUT_MS: how long the start waits, in all, for a database or event broker that is
   * away (default 5 minutes); past it the start fails naming the dependency. Keep it below the
   * orchestrator's startup probe window, so the pod says why before it is killed.
   */
  startupTimeoutMs?: number;
  /** Backoff of those waits (tests use short ones). */
  startupBackoff?: Pick<WaitOptions, 'firstDelayMs' | 'maxDelayMs'>;
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
  /** The migration folders main.ts declares for its migrate command: the start fails if they differ from the ServiceSpec's. */
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
  /** Migration folders applied after the shared ones (outbox, idempotency records): the service's own, and e.g. JOBS_MIGRATIONS. */
  migrations: string | string[];
  handlers(pool: Pool): Handlers<S>;
  /** Event consumers the service runs (started before it serves). */
  consumers?(pool: Pool, transport: EventTransport): Promise<Subscription[]>;
  /** Background loops (job workers, probes): started once the service serves, stopped first. */
  workers?(deps: WorkerDeps): Worker[];
  /** grpc-js server options over the defaults (SERVER_CHANNEL_OPTIONS), e.g. a longer connection-age grace for long streams. */
  grpcServerOptions?: GrpcServerOptions['channelOptions'];
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
  // Each step of the start is one log line with the time since the process started: a restart's
  // cost, and what it waited for, read from the log (docs/operations.md, "Restarts").
  const step = (message: string, fields: Record<string, unknown> = {}) =>
    logger.info({ ...fields, since_process_start_ms: Math.round(performance.now()) }, `start: ${message}`);
  const deadline = Date.now() + (config.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS);
  /** Each wait gets what is left of the one start-up deadline. */
  const wait = (): WaitOptions => ({ ...config.startupBackoff, timeoutMs: Math.max(0, deadline - Date.now()) });
  return resources.start(async () => {
    const pool = resources.add(createPool(config.databaseUrl, { applicationName: spec.name }), (p) => p.end());
    const migrations = [OUTBOX_MIGRATIONS, IDEMPOTENCY_MIGRATIONS, ...[spec.migrations].flat()];
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
      wait(),
    );
    step('database reachable, migrations applied', { applied });
    const server = new GrpcServer({
      name: spec.name,
      errorDomain: spec.errorDomain,
      logger,
      protoFiles: [spec.protoFile],
      callerVerifier,
      callerSigner,
      reflection: config.grpcReflection,
      channelOptions: spec.grpcServerOptions,
    });
    server.add(spec.grpcService, spec.definition, inTenantScope(spec.definition, spec.handlers(pool)));
    const transport: EventTransport = config.transport ?? new LocalTransport();
    // Consumers and topics need Kafka: a broker that is away or still electing leaders is waited
    // for (a fresh cluster's deploy starts every service at once); a refusal (credentials, ACLs,
    // a replication factor above the brokers) fails the start at once.
    const broker = {
      dependency: 'event broker',
      where: transport.where ?? 'KAFKA_BROKERS',
      hint: 'check that the brokers are reachable from this pod and that KAFKA_BROKERS names them',
    };
    const consumers = await untilAvailable(
      broker,
      logger,
      () => startConsumers(spec, pool, transport),
      isRetriableKafkaError,
      wait(),
    );
    // Consumers leave their groups first when the service stops (their partitions move to the
    // other replicas while this one drains), or here if the start fails half-way.
    let consumersStopped: Promise<unknown> | undefined;
    const stopConsumers = () => (consumersStopped ??= Promise.all(consumers.map((c) => c.stop())));
    resources.add(consumers, stopConsumers);
    if (consumers.length)
      step('event consumers subscribed; they join their groups in the background', { consumers: consumers.length });
    const relay = await untilAvailable(
      broker,
      logger,
      () => OutboxRelay.start({ pool, transport, source: spec.name, logger }),
      isRetriableKafkaError,
      wait(),
    );
    resources.add(relay, (r) => r.stop());
    step('outbox relay started');
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
    resources.add(sweepIdempotencyRecords(pool, logger), (timer) => clearInterval(timer));
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
    resources.add(consumers, stopConsumers);
    supervisor.start();
    logger.info(
      { port, workers: workers.map((w) => w.name), since_process_start_ms: Math.round(performance.now()) },
      `${spec.name} serving`,
    );
    return { port, stop: () => resources.close() };
  });
}

const DEFAULT_STARTUP_TIMEOUT_MS = 5 * 60_000;

/** How often expired Idempotency-Key records are deleted. */
const SWEEP_EVERY_MS = 10 * 60_000;

/** Deletes the service's expired Idempotency-Key records now and every SWEEP_EVERY_MS (on every replica: cheap and idempotent). */
function sweepIdempotencyRecords(pool: Pool, logger: Logger): NodeJS.Timeout {
  const sweep = async () => {
    try {
      let deleted = 0;
      for (let batch; (batch = await deleteExpiredIdempotencyRecords(pool)) > 0;) deleted += batch;
      if (deleted) logger.info({ deleted }, 'expired idempotency records deleted');
    } catch (err) {
      logger.warn({ err: String(err).slice(0, 200) }, 'idempotency record sweep failed; next try in 10 minutes');
    }
  };
  void sweep();
  const timer = setInterval(() => void sweep(), SWEEP_EVERY_MS);
  timer.unref();
  return timer;
}

/**
 * The ServiceSpec's consumers, all or none: when one fails to start (to be tried again), the ones that
 * had started are stopped, or each try would leave a consumer group member behind.
 */
async function startConsumers<S extends UnaryServiceDefinition>(
  spec: ServiceSpec<S>,
  pool: Pool,
  transport: EventTransport,
): Promise<Subscription[]> {
  if (!spec.consumers) return [];
  const started: Subscription[] = [];
  const tracking: EventTransport = {
    retentionMs: transport.retentionMs,
    where: transport.where,
    publish: (messages) => transport.publish(messages),
    ensureTopics: (topics) => transport.ensureTopics(topics),
    close: () => transport.close(),
    subscribe: async (opts) => {
      const subscription = await transport.subscribe(opts);
      started.push(subscription);
      return subscription;
    },
  };
  try {
    return await spec.consumers(pool, tracking);
  } catch (err) {
    await Promise.all(started.map((s) => s.stop().catch(() => undefined)));
    throw err;
  }
}

/**
 * Each call runs in its tenant's scope, so its database checkouts count against that tenant's share
 * of the pool (@workauto/db), waiting for it at most until shortly before the call's deadline: one
 * tenant's slow requests leave the other tenants connections. A streaming handler's every read runs
 * in the scope (its generator's body runs at each read, not where it was made), so an export or a
 * feed reads its pages under its tenant's share too.
 */
function inTenantScope<S extends UnaryServiceDefinition>(definition: S, handlers: Handlers<S>): Handlers<S> {
  return Object.fromEntries(
    Object.entries(handlers as Record<string, (req: unknown, ctx: CallContext) => unknown>).map(([name, handle]) => [
      name,
      definition[name]?.responseStream
        ? (req: unknown, ctx: CallContext) =>
            iterateForTenant(ctx.tenantId, handle.call(handlers, req, ctx) as AsyncIterable<unknown>, {
              deadline: ctx.deadline,
            })
        : (req: unknown, ctx: CallContext) =>
            runForTenant(ctx.tenantId, () => handle.call(handlers, req, ctx), { deadline: ctx.deadline }),
    ]),
  ) as Handlers<S>;
}
