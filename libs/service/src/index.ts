/**
 * The start-up every gRPC service shares, so each service's app.ts only says what is its own:
 * database pool → outbox and own migrations → gRPC server with its handlers → consumers → outbox
 * relay → listen → SERVING. Stopping runs it backwards (the server first, so in-flight calls
 * drain while their events can still be published); a start that fails half-way closes what it
 * had opened.
 */
import { createPool, runMigrations, type Pool } from '@workauto/db';
import { LocalTransport, OUTBOX_MIGRATIONS, OutboxRelay, type EventTransport, type Subscription } from '@workauto/events';
import { CallerSigner, CallerVerifier, GrpcServer, Resources, type Handlers, type UnaryServiceDefinition } from '@workauto/grpc';
import type { Logger } from '@workauto/logger';

/** What main.ts, make dev's stack and the tests give every service. */
export interface ServiceConfig {
  databaseUrl: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Event streams (Kafka, or in-process for one-process runs); a private in-process one by default. */
  transport?: EventTransport;
  /** How often the database is pinged for the health status (default 5 s). */
  healthCheckMs?: number;
  /** CALLER_VERIFY_KEYS: the public keys (JWKS JSON) whose signed caller tokens this service accepts. */
  callerVerifyKeys: string;
  /** CALLER_SIGNING_KEY: this service's own private JWK, only if it calls other services on a caller's behalf. */
  callerSigningKey?: string | undefined;
  /** GRPC_REFLECTION: serve gRPC reflection (off by default). */
  grpcReflection?: boolean | undefined;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

export interface ServiceSpec<S extends UnaryServiceDefinition> {
  /** e.g. notes-tasks: log lines, the outbox relay's source, the pool's application_name. */
  name: string;
  /** ErrorInfo domain of its errors, e.g. notes.workauto. */
  errorDomain: string;
  /** Under proto/, for reflection: workauto/<pkg>/v1/<pkg>.proto. */
  protoFile: string;
  /** Fully qualified gRPC service name (health status is reported under it). */
  grpcService: string;
  definition: S;
  /** The service's own migrations folder (applied after the shared outbox tables). */
  migrations: string;
  handlers(pool: Pool): Handlers<S>;
  /** Event consumers the service runs (started before it serves). */
  consumers?(pool: Pool, transport: EventTransport): Promise<Subscription[]>;
}

export async function startService<S extends UnaryServiceDefinition>(spec: ServiceSpec<S>, config: ServiceConfig, logger: Logger): Promise<RunningService> {
  // Key problems stop the start before anything is opened, with a message that says what to set.
  const callerVerifier = new CallerVerifier(config.callerVerifyKeys);
  const callerSigner = config.callerSigningKey ? new CallerSigner(config.callerSigningKey, { issuer: spec.name }) : undefined;
  const resources = new Resources();
  return resources.start(async () => {
    const pool = resources.add(createPool(config.databaseUrl, { applicationName: spec.name }), (p) => p.end());
    const applied = await runMigrations(pool, [OUTBOX_MIGRATIONS, spec.migrations]);
    if (applied.length) logger.info({ applied }, 'migrations applied');
    const server = new GrpcServer({
      name: spec.name, errorDomain: spec.errorDomain, logger, protoFiles: [spec.protoFile], callerVerifier, callerSigner, reflection: config.grpcReflection,
    });
    server.add(spec.grpcService, spec.definition, spec.handlers(pool));
    const transport = config.transport ?? new LocalTransport();
    for (const consumer of (await spec.consumers?.(pool, transport)) ?? []) resources.add(consumer, (c) => c.stop());
    resources.add(await OutboxRelay.start({ pool, transport, source: spec.name, logger }), (r) => r.stop());
    resources.add(server, (s) => s.shutdown());
    const port = await server.listen(config.host, config.port);
    server.markServing();
    resources.add(watchDatabase(pool, server, logger, config.healthCheckMs ?? 5_000), (timer) => clearInterval(timer));
    logger.info({ port }, `${spec.name} serving`);
    return { port, stop: () => resources.close() };
  });
}

/**
 * Health follows the database: a service that cannot reach it says NOT_SERVING (so the gateway's
 * readiness and Kubernetes stop sending it traffic) until a ping answers again.
 */
function watchDatabase(pool: Pool, server: GrpcServer, logger: Logger, everyMs: number): NodeJS.Timeout {
  let healthy = true;
  let checking = false;
  const timer = setInterval(async () => {
    if (checking) return;
    checking = true;
    const ok = await pool.query('SELECT 1').then(() => true, () => false);
    checking = false;
    if (ok === healthy) return;
    healthy = ok;
    if (ok) {
      server.markServing();
      logger.info('database reachable again; SERVING');
    } else {
      server.markNotServing();
      logger.warn('database unreachable; NOT_SERVING until it answers again (check DATABASE_URL and the server)');
    }
  }, everyMs);
  timer.unref();
  return timer;
}

