import * as grpc from '@grpc/grpc-js';
import { metrics, type Histogram } from '@opentelemetry/api';
import { HealthImplementation } from 'grpc-health-check';
import { IdempotencyKeyInUseError, IdempotencyKeyReusedError, runKeyed } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { loadRules, loadSchema, ruleViolations, type Violation } from '@workauto/protos';
import { callerAudience, type CallerSigner, type CallerVerifier } from './caller-identity.js';
import { CallContext } from './context.js';
import { asDomainError, errors, toServiceError, DomainError } from './errors.js';
import { IDEMPOTENT_REPLAYED_KEY, KeyedMethod } from './idempotency.js';
import { listCallScope } from './pagination.js';

/** A ts-proto grpc-js service definition: method name → path and (de)serializers. */
export type ServiceDefinition = Record<
  string,
  {
    path: string;
    requestStream: false;
    /** true: a server-streaming rpc (`returns (stream X)`), whose handler yields its messages. */
    responseStream: boolean;
    requestDeserialize(b: Buffer): unknown;
    responseSerialize(v: never): Buffer;
    /** ts-proto's definitions have it: a keyed call's stored response is read back with it. */
    responseDeserialize?(b: Buffer): unknown;
  }
>;
/** The name services' specs use (libs/service); server-streaming methods are allowed too. */
export type UnaryServiceDefinition = ServiceDefinition;

type ResponseOf<M> = M extends { responseSerialize(v: infer R): Buffer } ? R : never;

/**
 * nice-grpc style handlers: take the request and the call context, return the response or throw a
 * DomainError. A server-streaming rpc's handler is an async generator: it yields each message
 * (sent as the client reads them) and throws a DomainError as the call's status, also after
 * messages were sent.
 */
export type Handlers<S extends ServiceDefinition> = {
  [K in keyof S]: S[K]['responseStream'] extends true
    ? (request: ReturnType<S[K]['requestDeserialize']>, ctx: CallContext) => AsyncIterable<ResponseOf<S[K]>>
    : (request: ReturnType<S[K]['requestDeserialize']>, ctx: CallContext) => Promise<ResponseOf<S[K]>>;
};

export interface GrpcServerOptions {
  /** Service name in logs and the health service, e.g. `identity`. */
  name: string;
  /** ErrorInfo.domain of this service's errors, e.g. `identity.workauto`. */
  errorDomain: string;
  logger: Logger;
  /** Proto files (relative to proto/) served by reflection. */
  protoFiles: string[];
  /** Every call must carry a caller token signed by one of these keys (health checks excepted). */
  callerVerifier: CallerVerifier;
  /** This service's own signing key, for calls it makes on a caller's behalf (CallContext.toMetadata). */
  callerSigner?: CallerSigner | undefined;
  /** gRPC server reflection (GRPC_REFLECTION=true): off by default, as it lists every rpc to anyone who can connect. */
  reflection?: boolean | undefined;
  /** grpc-js server options over SERVER_CHANNEL_OPTIONS (a service with long streams lengthens the connection-age grace). */
  channelOptions?: grpc.ServerOptions | undefined;
}

/** The field rules a request broke, noted when its bytes were decoded (withFieldRules). */
const brokenRules = new WeakMap<object, Violation[]>();

/**
 * The service's definition with each request checked against the protos' field rules
 * (`buf.validate`, docs/api.md §16) as it is decoded: a direct gRPC caller gets the same
 * violations as a client of the gateway, before any handler runs (refuseBrokenRules, after the
 * caller is verified). Rpcs of a service the descriptor set does not hold are left as they are.
 */
function withFieldRules<S extends ServiceDefinition>(fullName: string, definition: S): S {
  const service = loadSchema().registry.getService(fullName);
  if (!service) return definition;
  const checked: ServiceDefinition = {};
  for (const [key, def] of Object.entries(definition)) {
    const input = service.methods.find((m) => def.path === `/${fullName}/${m.name}`)?.input;
    checked[key] = !input
      ? def
      : {
          ...def,
          requestDeserialize: (bytes: Buffer) => {
            const request = def.requestDeserialize(bytes);
            const violations = ruleViolations(input, bytes);
            if (violations.length && typeof request === 'object' && request) brokenRules.set(request, violations);
            return request;
          },
        };
  }
  return checked as S;
}

function refuseBrokenRules(request: unknown): void {
  const violations = typeof request === 'object' && request ? brokenRules.get(request) : undefined;
  if (violations) throw errors.invalidArgument(violations);
}

/**
 * Every server ends each client connection after max_connection_age (plus a grace for calls in
 * flight): the client then resolves the service's name again (client.ts), so replicas added since
 * get their share of calls within minutes instead of never.
 */
export const SERVER_CHANNEL_OPTIONS: grpc.ServerOptions = {
  'grpc.max_receive_message_length': 4 * 1024 * 1024,
  'grpc.max_connection_age_ms': 120_000,
  'grpc.max_connection_age_grace_ms': 30_000,
  // No channelz admin service reads grpc-js's per-call counters and traces (client.ts says the same).
  'grpc.enable_channelz': 0,
};

/**
 * Writes one message of a server stream and resolves once HTTP/2 has sent it (its write callback),
 * or rejects with the call's abort reason (a cancelled call never calls back).
 */
function sent(call: grpc.ServerWritableStream<unknown, unknown>, message: unknown, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    call.write(message, (err?: Error | null) => {
      signal.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    });
  });
}

/**
 * One gRPC server with what every service needs: thin typed handlers, call context from the verified
 * caller token only, errors mapped once, health (NOT_SERVING until ready and again on shutdown; no
 * caller token needed), reflection when enabled.
 */
export class GrpcServer {
  readonly server: grpc.Server;
  private readonly health = new HealthImplementation({ '': 'NOT_SERVING' });
  private readonly serviceNames: string[] = [];
  /** rpc.server.call.duration (OpenTelemetry's RPC conventions): calls, latency and status per method. */
  private readonly callDuration: Histogram;

  constructor(private readonly options: GrpcServerOptions) {
    this.server = new grpc.Server({ ...SERVER_CHANNEL_OPTIONS, ...options.channelOptions });
    // Taken here, not at module load: the meter provider is registered when telemetry starts.
    this.callDuration = metrics.getMeter('@workauto/grpc').createHistogram('rpc.server.call.duration', {
      description: 'Duration of gRPC calls this server answered',
      unit: 's',
      advice: { explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] },
    });
    this.health.addToServer(this.server);
  }

  add<S extends ServiceDefinition>(fullName: string, definition: S, handlers: Handlers<S>): this {
    const impl: grpc.UntypedServiceImplementation = {};
    definition = withFieldRules(fullName, definition);
    for (const [method, def] of Object.entries(definition)) {
      const handler = handlers[method as keyof S] as (req: unknown, ctx: CallContext) => unknown;
      impl[method] = def.responseStream
        ? this.wrapStream(def.path, handler as (req: unknown, ctx: CallContext) => AsyncIterable<unknown>)
        : this.wrapUnary(def, handler as (req: unknown, ctx: CallContext) => Promise<unknown>);
    }
    this.server.addService(definition as unknown as grpc.ServiceDefinition, impl);
    this.serviceNames.push(fullName);
    this.health.setStatus(fullName, 'NOT_SERVING');
    return this;
  }

  /**
   * A unary rpc. A call with an Idempotency-Key records it with its write (@workauto/db runKeyed):
   * a repeat of a call that wrote gets that call's response, marked replayed in the response
   * metadata, and the handler does not run again.
   */
  private wrapUnary(
    def: ServiceDefinition[string],
    handler: (req: unknown, ctx: CallContext) => Promise<unknown>,
  ): grpc.handleUnaryCall<unknown, unknown> {
    const begin = this.calls(def.path);
    const keyedMethod = new KeyedMethod(def);
    return (call, callback) => {
      const c = begin(call);
      c.run(async () => {
        const ctx = c.context();
        refuseBrokenRules(call.request);
        const write = keyedMethod.write(call.request, ctx);
        if (!write) return handler(call.request, ctx);
        try {
          const outcome = await runKeyed(write, () => handler(call.request, ctx));
          if (!outcome.replayed) return outcome.response;
          const response = write.replay(outcome.stored);
          const replayed = new grpc.Metadata();
          replayed.set(IDEMPOTENT_REPLAYED_KEY, 'true');
          call.sendMetadata(replayed);
          return response;
        } catch (err) {
          return keyedFailure(err);
        }
      }).then(
        (response) => {
          c.ok();
          callback(null, response);
        },
        (err: unknown) => callback(c.failed(err)),
      );
    };
  }

  /**
   * A server-streaming rpc: each message the handler yields is written as the client reads them,
   * the status follows the last one; a failure, also after messages went out, ends the call with
   * its mapped status. The handler is asked for its next message only once the last one has gone
   * out on the HTTP/2 stream (its flow control passes the client's pace back here): the process
   * holds one message per stream, not the 16 a Writable buffers, and a handler that reads a page
   * per message reads the next page only when the client has taken the last one.
   */
  private wrapStream(
    path: string,
    handler: (req: unknown, ctx: CallContext) => AsyncIterable<unknown>,
  ): grpc.handleServerStreamingCall<unknown, unknown> {
    const begin = this.calls(path);
    return (call) => {
      const c = begin(call);
      c.run(async () => {
        const ctx = c.context();
        refuseBrokenRules(call.request);
        for await (const message of handler(call.request, ctx)) {
          ctx.signal.throwIfAborted();
          await sent(call, message, ctx.signal);
        }
        ctx.signal.throwIfAborted();
      }).then(
        () => {
          c.ok();
          call.end();
        },
        (err: unknown) => call.emit('error', c.failed(err)),
      );
    };
  }

  /**
   * What every call of `path` shares, whatever its kind: the context from the verified caller token
   * only (without one the handler never runs), an AbortSignal for the client's cancel and the
   * deadline, errors mapped once, one log line and the duration metric.
   */
  private calls(path: string) {
    const { logger, errorDomain, callerVerifier, callerSigner } = this.options;
    const audience = callerAudience(path);
    const [service = '', method = ''] = path.slice(1).split('/');
    const attributes = (code: grpc.status) => ({
      'rpc.system': 'grpc',
      'rpc.service': service,
      'rpc.method': method,
      'rpc.grpc.status_code': code,
    });
    return (call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>) => {
      const started = performance.now();
      let answered = false;
      const deadline = call.getDeadline();
      const deadlineAt =
        deadline instanceof Date ? deadline.getTime() : Number.isFinite(deadline) ? Number(deadline) : undefined;
      // The AbortSignal is made when a handler first reads ctx.signal (most never do), and aborted
      // with the reason that ended the call: grpc-js itself ends a call at its deadline (the client
      // gets DEADLINE_EXCEEDED) and then emits 'cancelled', as it does on the client's cancel (and
      // after calls it completed: only a call still running is aborted). No timer or controller
      // of our own per call (docs/benchmarks.md, "Where the time goes").
      let abort: AbortController | undefined;
      let ended: DomainError | undefined;
      call.on('cancelled', () => {
        if (answered) return;
        ended =
          deadlineAt !== undefined && Date.now() >= deadlineAt - DEADLINE_SLACK_MS
            ? new DomainError(grpc.status.DEADLINE_EXCEEDED, 'DEADLINE_EXCEEDED', 'deadline exceeded')
            : new DomainError(grpc.status.CANCELLED, 'CANCELLED', 'the caller cancelled the call');
        abort?.abort(ended);
      });
      const signal = () => {
        if (!abort) {
          abort = new AbortController();
          if (ended) abort.abort(ended);
        }
        return abort.signal;
      };
      let ctx: CallContext | undefined;
      const settle = () => {
        answered = true;
        return performance.now() - started;
      };
      return {
        context: () =>
          (ctx = CallContext.fromCaller(
            callerVerifier.verify(call.metadata, audience),
            signal,
            callerSigner,
            deadlineAt,
          )),
        // Within the call's scope: its list cursors are bound to the rpc and its request. `work` is
        // an async function, so a throw is its rejection.
        run: <T>(work: () => Promise<T>) => listCallScope.run({ path, request: call.request }, work),
        ok: () => {
          const ms = settle();
          logger.debug({ rpc: path, request_id: ctx?.requestId, ms: Math.round(ms) }, 'rpc ok');
          this.callDuration.record(ms / 1000, attributes(grpc.status.OK));
        },
        failed: (err: unknown): Partial<grpc.ServiceError> => {
          const ms = settle();
          const known = asDomainError(err);
          const mapped = toServiceError(known, errorDomain);
          const log = {
            rpc: path,
            request_id: ctx?.requestId,
            grpc_code: grpc.status[mapped.code ?? 2],
            ms: Math.round(ms),
          };
          // A failure of the service's own (not a DomainError a handler chose) that passes: the
          // database away or slow, a tenant's share of the pool in use, a lost concurrency race.
          // The caller is told to retry (503, 429, 409); not a bug, but what an operator sizing
          // pools wants to see.
          if (!(err instanceof DomainError) && isCondition(known))
            logger.warn(
              { ...log, reason: known.reason, cause: describeCondition(err) },
              `rpc failed: ${known.message}`,
            );
          else if (err instanceof DomainError || mapped.code === grpc.status.RESOURCE_EXHAUSTED)
            logger.info({ ...log, reason: known.reason }, 'rpc failed');
          // A client's input that reached SQL and failed there (a NUL byte, a value out of range):
          // a check the handler lacks, but the caller's input, never an error of the service.
          else if (mapped.code === grpc.status.INVALID_ARGUMENT)
            logger.warn(
              { ...log, cause: String((err as Error).message).slice(0, 200) },
              'rpc failed on input a handler did not check',
            );
          else logger.error({ ...log, err }, 'rpc failed with an unexpected error');
          this.callDuration.record(ms / 1000, attributes(mapped.code ?? grpc.status.UNKNOWN));
          return mapped;
        },
      };
    };
  }

  /** Binds and starts serving; health stays NOT_SERVING until markServing(). Returns the bound port. */
  async listen(host: string, port: number): Promise<number> {
    await loadRules(); // the field rules every request is checked against, before the first one comes
    if (this.options.reflection) await this.addReflection();
    return new Promise((resolve, reject) => {
      // An IPv6 address goes in brackets: `[::]:50051` (every address, IPv4 ones too, on a dual-stack node).
      const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
      this.server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, bound) =>
        err ? reject(err) : resolve(bound),
      );
    });
  }

  /**
   * Reflection and its loader (@grpc/reflection, @grpc/proto-loader, protobufjs) are imported only
   * here, when reflection is on: off by default, a service process never loads them.
   */
  private async addReflection(): Promise<void> {
    const [{ ReflectionService }, { reflectionDefinition }] = await Promise.all([
      import('@grpc/reflection'),
      import('@workauto/protos/reflection'),
    ]);
    const { definition, services } = reflectionDefinition(this.options.protoFiles);
    new ReflectionService(definition, { services }).addToServer(this.server);
  }

  /** NOT_SERVING without stopping (a dependency is down): balancers and the gateway's readiness see it. */
  markNotServing(): void {
    this.health.setStatus('', 'NOT_SERVING');
    for (const name of this.serviceNames) this.health.setStatus(name, 'NOT_SERVING');
  }

  markServing(): void {
    this.health.setStatus('', 'SERVING');
    for (const name of this.serviceNames) this.health.setStatus(name, 'SERVING');
  }

  /**
   * The status of one more health name, apart from '' and the services (which markServing and
   * markNotServing move together): e.g. `liveness`, which says the process works while readiness
   * follows its dependencies.
   */
  setHealth(name: string, status: 'SERVING' | 'NOT_SERVING'): void {
    this.health.setStatus(name, status);
  }

  /** NOT_SERVING first (so balancers stop sending), then drain, then force after graceMs. */
  async shutdown(graceMs = 10_000): Promise<void> {
    this.markNotServing();
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.options.logger.warn({ grace_ms: graceMs }, 'calls still running after the grace period; closing them');
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }
}

/**
 * grpc-js's deadline timer and our reading of the clock may differ by a timer tick: a cancel this
 * close to the deadline is the deadline's.
 */
const DEADLINE_SLACK_MS = 5;

/** A keyed call's refusals as the API's 409s (the gateway answers the same ones from its own record). */
function keyedFailure(err: unknown): never {
  if (err instanceof IdempotencyKeyReusedError)
    throw new DomainError(
      grpc.status.ABORTED,
      'IDEMPOTENCY_KEY_REUSED',
      'this Idempotency-Key was already used with a different request; use a new key for a new request',
    );
  if (err instanceof IdempotencyKeyInUseError)
    throw err.abandoned
      ? new DomainError(
          grpc.status.FAILED_PRECONDITION,
          'IDEMPOTENT_RESPONSE_LOST',
          'the request with this Idempotency-Key was applied, but its response was not kept (the service stopped while answering); read the result with a GET instead of retrying',
        )
      : new DomainError(
          grpc.status.ABORTED,
          'IDEMPOTENCY_KEY_IN_USE',
          'a request with this Idempotency-Key is still running; retry after it has finished',
        );
  throw err;
}

/** Failures that say the service's dependency is unwell (503) or the request lost a race (409): retried, not bugs. */
function isCondition(known: DomainError): boolean {
  return (
    known.code === grpc.status.UNAVAILABLE ||
    known.code === grpc.status.ABORTED ||
    known.reason === 'TENANT_DATABASE_BUSY'
  );
}

/** What a condition is logged with: the driver's code and message (connection errors and SQLSTATEs, never request data). */
function describeCondition(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? `${e.code} ` : '';
  const name = typeof e?.name === 'string' && e.name !== 'Error' ? `${e.name}: ` : '';
  return `${code}${name}${typeof e?.message === 'string' ? e.message : String(err)}`.slice(0, 300);
}
