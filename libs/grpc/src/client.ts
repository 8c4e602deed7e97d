import * as grpc from '@grpc/grpc-js';
import CircuitBreaker from 'opossum';
import { service as healthService } from 'grpc-health-check';
import { DomainError, decodeStatusDetails } from './errors.js';

/** What a unary call needs: a ts-proto method definition fits, and so does the gateway's dynamic one. */
export interface UnaryMethod<Req, Res> {
  path: string;
  requestSerialize(value: Req): Buffer;
  responseDeserialize(value: Buffer): Res;
}

export interface DownstreamOptions {
  /** Deadline of each call unless the call sets its own. */
  deadlineMs?: number;
  /** Failure ratio (0..100) over the rolling window that opens the circuit. */
  errorThresholdPercentage?: number;
  /** How long the circuit stays open before one trial call. */
  resetTimeoutMs?: number;
  /** Calls in the window before the ratio counts (so one early failure does not open it). */
  volumeThreshold?: number;
}

/** Codes that say the downstream is unwell (they count against the circuit); the rest are answers. */
const FAILURE_CODES = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.INTERNAL, grpc.status.UNKNOWN]);

const HealthClient = grpc.makeClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'grpc.health.v1.Health');

/**
 * A connection to one downstream service: every call has a deadline, goes through one circuit
 * breaker per service (opossum), and carries the caller's metadata.
 */
export class Downstream {
  private readonly client: grpc.Client;
  private readonly health: grpc.Client;
  private readonly breaker: CircuitBreaker<[() => Promise<unknown>], unknown>;
  private readonly deadlineMs: number;

  constructor(
    readonly name: string,
    readonly address: string,
    options: DownstreamOptions = {},
  ) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
    this.health = new HealthClient(address, grpc.credentials.createInsecure());
    this.deadlineMs = options.deadlineMs ?? 5_000;
    this.breaker = new CircuitBreaker((call: () => Promise<unknown>) => call(), {
      timeout: false, // the gRPC deadline bounds each call
      errorThresholdPercentage: options.errorThresholdPercentage ?? 50,
      resetTimeout: options.resetTimeoutMs ?? 5_000,
      volumeThreshold: options.volumeThreshold ?? 10,
      rollingCountTimeout: 10_000,
      errorFilter: (err: grpc.ServiceError) => !FAILURE_CODES.has(err.code),
    });
  }

  call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, opts: { metadata?: grpc.Metadata; deadlineMs?: number } = {}): Promise<Res> {
    const deadline = new Date(Date.now() + (opts.deadlineMs ?? this.deadlineMs));
    const attempt = () =>
      new Promise<Res>((resolve, reject) => {
        this.client.makeUnaryRequest(
          method.path,
          method.requestSerialize,
          method.responseDeserialize,
          request,
          opts.metadata ?? new grpc.Metadata(),
          { deadline },
          (err, response) => (err ? reject(err) : resolve(response as Res)),
        );
      });
    return (this.breaker.fire(attempt) as Promise<Res>).catch((err: unknown) => {
      if ((err as { code?: unknown }).code === 'EOPENBREAKER') {
        throw new DomainError(grpc.status.UNAVAILABLE, 'SERVICE_UNAVAILABLE', `the ${this.name} service is unavailable; retry in a few seconds`);
      }
      throw err;
    });
  }

  /** Re-raises a downstream failure as the same DomainError, so it travels on unchanged. */
  static rethrow(err: unknown): never {
    if (err && typeof err === 'object' && 'code' in err && typeof (err as grpc.ServiceError).code === 'number' && 'metadata' in err) {
      const d = decodeStatusDetails(err as grpc.ServiceError);
      throw new DomainError(d.code, d.reason || grpc.status[d.code] || 'UNKNOWN', d.message, {
        metadata: d.metadata,
        fieldViolations: d.fieldViolations,
        ...(d.httpStatus ? { httpStatus: d.httpStatus } : {}),
        ...(d.domain ? { domain: d.domain } : {}),
      });
    }
    throw err;
  }

  /** True when the service's health check answers SERVING within timeoutMs. */
  isServing(timeoutMs = 1_000): Promise<boolean> {
    return new Promise((resolve) => {
      (this.health as unknown as { check: (req: object, opts: grpc.CallOptions, cb: (e: unknown, r?: { status?: string }) => void) => void }).check(
        { service: '' },
        { deadline: new Date(Date.now() + timeoutMs) },
        (err, res) => resolve(!err && res?.status === 'SERVING'),
      );
    });
  }

  close(): void {
    this.breaker.shutdown();
    this.client.close();
    this.health.close();
  }
}
