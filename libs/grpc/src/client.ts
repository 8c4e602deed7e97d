import * as grpc from '@grpc/grpc-js';
import { metrics, type Counter, type Gauge } from '@opentelemetry/api';
import CircuitBreaker from 'opossum';
import { service as healthService } from 'grpc-health-check';
import { backgroundClock, retry } from '@workauto/retry';
import { DISCOVERY_SCHEME, Discovery, REFRESH_OPTION } from './discovery.js';
import { DomainError, decodeStatusDetails } from './errors.js';

/** What a call (unary or server-streaming) needs: a ts-proto method definition fits, and so does the gateway's dynamic one. */
export interface UnaryMethod<Req, Res> {
  path: string;
  requestSerialize(value: Req): Buffer;
  responseDeserialize(value: Buffer): Res;
}

export interface DownstreamOptions {
  /** Deadline of each call unless the call sets its own. */
  deadlineMs?: number;
  /** Transport-failure ratio (0..100) of one method over the rolling window that opens its circuit. */
  errorThresholdPercentage?: number;
  /** How long a method's circuit stays open before one trial call. */
  resetTimeoutMs?: number;
  /** A method's calls in the window before the ratio counts (low: a hung method costs a deadline per call). */
  volumeThreshold?: number;
  /** Deadline of a health check of one address (when every address's times out, all are asked again with twice as long). */
  healthTimeoutMs?: number;
  /** How often an address left out (or a service marked down) is checked again (default 1 s). */
  healthRecheckMs?: number;
  /** How often the service's name is resolved again (default 2 s; discovery.ts). */
  resolveEveryMs?: number;
  /**
   * Calls in flight to the service from this process at most (default 512); more answer 503
   * SERVICE_OVERLOADED at once. Under overload, calls past the cap would only wait for their
   * deadline, and a burst of expiring deadlines resets so many HTTP/2 streams that the service
   * ends the connection (docs/benchmarks.md, "The API mix"): shedding them keeps the service
   * answering the calls it has.
   */
  maxInFlight?: number;
  /**
   * Calls in flight from this process for one tenant at most (default a quarter of maxInFlight:
   * 128 of 512), unary calls and streams together; more answer 429 TENANT_CALLS_LIMITED at once,
   * so one tenant's calls (an MCP loop, a burst of slow ones) never take the whole cap.
   */
  tenantMaxInFlight?: number;
  /** Server streams open to the service from this process at most (default maxInFlight), beside the unary calls. */
  maxStreams?: number;
  /** grpc-js channel options over the defaults (CLIENT_CHANNEL_OPTIONS), e.g. a shorter re-resolution interval in tests. */
  channelOptions?: grpc.ChannelOptions;
}

/**
 * Every Downstream balances per call, not per connection: the address is resolved through DNS
 * (discovery.ts), which for a Kubernetes headless Service returns every ready pod, and round_robin
 * spreads calls over all of them. With the default pick_first, a client keeps one connection to
 * one pod for its lifetime, so new replicas (or an HPA's) get no traffic. The name is resolved
 * again every few seconds and whenever a connection ends, so a rollout's new pods get calls as soon
 * as DNS lists them.
 */
export const CLIENT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
  // channelz (grpc-js's per-call counters and traces for a channelz admin service) is served by
  // nothing here; keeping it on cost every call its bookkeeping.
  'grpc.enable_channelz': 0,
};

/**
 * grpc-js captures a stack trace as each call starts, only to append it to the error of a call that
 * fails ("for call at"): through optimised, inlined frames that capture was the client's largest
 * single cost per call. With the limit at 0 while the call starts, a failed call's error keeps its
 * code, message and own stack, without the starting caller's frames (our errors are mapped by code).
 */
function withoutCallerStack<T>(start: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return start();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * A server stream's messages are read one ahead of the caller, not the 16 a Readable in object mode
 * buffers by default: the caller (the gateway, writing to a slow client) holds one message per
 * stream, and HTTP/2 flow control tells the service to wait after it (grpc-js takes no option for
 * it, so the Readable's own state is set).
 */
function readAheadOne(call: grpc.ClientReadableStream<unknown>): void {
  const state = (call as unknown as { _readableState?: { highWaterMark?: number } })._readableState;
  if (state && typeof state.highWaterMark === 'number') state.highWaterMark = 1;
}

/** host:port → workauto-dns:///host:port (discovery.ts); a target that names its scheme (dns:, ipv4:, unix:) is kept. */
export function grpcTarget(address: string): string {
  return /^(dns|ipv4|ipv6|unix|unix-abstract|vsock|workauto-dns):/.test(address)
    ? address
    : `${DISCOVERY_SCHEME}:///${address}`;
}

/**
 * The only codes that count against a circuit: the service (or the way to it) is unwell. Every
 * other code is an answer about this call (a caller's bad input, a handler's bug) and must never
 * make the service refuse other callers, or other tenants.
 */
const TRANSPORT_FAILURES = new Set([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]);

function isTransportFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (isBrokenConnection(err)) return true;
  if (typeof code !== 'number' || !TRANSPORT_FAILURES.has(code)) return false;
  // A status with a service-specific reason is the service's own answer about a third party it
  // asked (an app's MCP server, BYOK_PROBE_UNAVAILABLE): the service is well and must keep being
  // asked. The kit's own reasons say the service itself is unwell (its database is away, a handler
  // ran past its deadline) and count, as a status without a reason does.
  const reason = decodeStatusDetails(err as grpc.ServiceError).reason;
  return !reason || SERVICE_UNWELL_REASONS.has(reason);
}

/**
 * grpc-js's INTERNAL for a call whose HTTP/2 stream or connection broke before the service
 * answered: "Received RST_STREAM with code N …" (e.g. the service's HTTP/2 stack ended the
 * connection with GOAWAY(INTERNAL_ERROR) — nghttp2 does so past ~1,000 cancelled calls, which an
 * overload's burst of deadlines produces) or "Failed to start HTTP/2 stream …". No service sent
 * it (the kit's servers always send details), so it is a transport failure like UNAVAILABLE, not a
 * bug of the service: the client gets 503 and a retry, never a 500.
 */
function isBrokenConnection(err: unknown): boolean {
  const e = err as { code?: unknown; details?: unknown } | null;
  return (
    e?.code === grpc.status.INTERNAL &&
    typeof e.details === 'string' &&
    /^(Received RST_STREAM with code|Failed to start HTTP\/2 stream)/.test(e.details) &&
    !decodeStatusDetails(err as grpc.ServiceError).reason
  );
}

/** grpc-js's own refusal of a response over the client's receive limit (no service sends it). */
function isOversizedResponse(err: unknown): boolean {
  const e = err as { code?: unknown; details?: unknown } | null;
  return (
    e?.code === grpc.status.RESOURCE_EXHAUSTED &&
    typeof e.details === 'string' &&
    e.details.startsWith('Received message larger than max') &&
    !decodeStatusDetails(err as grpc.ServiceError).reason
  );
}

/** Reasons the kit gives when the service itself cannot answer (errors.ts, server.ts). */
const SERVICE_UNWELL_REASONS = new Set([
  'DATABASE_UNAVAILABLE',
  'DATABASE_TIMEOUT',
  'DEADLINE_EXCEEDED',
  'SERVICE_UNAVAILABLE',
]);

/** The window a method's circuit counts its calls over. */
const ROLLING_WINDOW_MS = 10_000;

const HealthClient = grpc.makeClientConstructor(healthService, 'grpc.health.v1.Health');
/** A health recheck that found the service, or the address, failing still: check again. */
const STILL_FAILING = new Error('still failing its health check');
/** A left-out address no longer resolved (its pod was replaced): its rechecks end. */
const GONE = new Error('no longer resolved');

/** The target of one resolved address (host:port, an IPv6 host in brackets). */
function addressTarget(address: string): string {
  return address.startsWith('[') ? `ipv6:${address}` : `ipv4:${address}`;
}

type Breaker = CircuitBreaker<[() => Promise<unknown>, string | undefined], unknown>;

/** What a call says about itself beside its method and request. */
export interface CallOptions {
  metadata?: grpc.Metadata;
  deadlineMs?: number;
  /** Cancels the call in flight (the service sees the cancel); the call rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** The tenant the call acts for: its share of the in-flight cap, and whose failures these are. */
  tenant?: string | undefined;
  /** Gets the response's initial metadata (e.g. that a keyed call was replayed). */
  onMetadata?: ((metadata: grpc.Metadata) => void) | undefined;
}

/**
 * A tenant that had at least this many calls in flight to a service within a circuit's window, and
 * whose calls fail while no other tenant's do, is taken to wait in a queue of its own making (its
 * share of the service's database, its own requests ahead of it), not to see the service unwell:
 * its failures open no circuit.
 */
const BUSY_TENANT_CALLS = 8;

/**
 * A connection to one downstream service: every call has a deadline and carries the caller's
 * metadata, and two levels of circuit protect callers from a service that is unwell:
 * - one breaker per method (opossum) counts only transport failures (UNAVAILABLE,
 *   DEADLINE_EXCEEDED, a connection that broke under the call), so a slow or failing route opens
 *   alone and the service's other routes go on;
 * - any transport failure triggers one health check of each of the service's addresses (at most
 *   one round in flight). An address that fails it (no answer, NOT_SERVING, unreachable) is left
 *   out of the calls' picks and checked again every healthRecheckMs until it answers SERVING; the
 *   others go on serving. Only when every address fails, and no call succeeded meanwhile, is the
 *   whole service marked down: every call answers 503 at once until an address answers again. A
 *   hung service is thus found by its first deadline, not after ten of them, and one replica's
 *   failed check (a pod draining, a probe starved of CPU) never takes the others out.
 */
export class Downstream {
  private readonly client: grpc.Client;
  private readonly health: grpc.Client;
  private readonly breakers = new Map<string, Breaker>();
  private readonly deadlineMs: number;
  private readonly options: Required<Omit<DownstreamOptions, 'deadlineMs' | 'channelOptions'>>;
  /** Unary calls started and not yet settled (maxInFlight caps it). */
  private inFlight = 0;
  /** Server streams open (maxStreams caps it). */
  private streams = 0;
  /** Calls and streams in flight per tenant (tenantMaxInFlight caps each). */
  private readonly tenantCalls = new Map<string, number>();
  /** Per method: when each tenant's call last failed in a way that counts (tenant '' = a call without one). */
  private readonly failures = new Map<string, Map<string, number>>();
  /** Tenants that reached BUSY_TENANT_CALLS in flight, and until when that counts (a circuit's window later). */
  private readonly busyTenants = new Map<string, number>();
  private down = false;
  private probing = false;
  /** Aborted by close(): ends the health rechecks. */
  private readonly closing = new AbortController();
  /** Addresses left out of the picks, each with what ends its rechecks (it answered meanwhile). */
  private readonly leftOut = new Map<string, AbortController>();
  /** The service's addresses (undefined for a target of another scheme: then one address, the target). */
  private readonly discovery: Discovery | undefined;
  /** Calls that succeeded so far: one that succeeds while the addresses are checked proves the service up. */
  private succeeded = 0;
  private closed = false;
  /** 1 while the service is marked down (its calls answer 503 without being tried), else 0. */
  private readonly downGauge: Gauge;
  /** Calls answered 503 without being tried: the service was down or the method's circuit open. */
  private readonly shortCircuited: Counter;

  constructor(
    readonly name: string,
    readonly address: string,
    options: DownstreamOptions = {},
  ) {
    const target = grpcTarget(address);
    this.discovery = target.startsWith(`${DISCOVERY_SCHEME}:`) ? new Discovery() : undefined;
    const channelOptions = {
      ...CLIENT_CHANNEL_OPTIONS,
      ...this.discovery?.channelOptions,
      ...(options.resolveEveryMs ? { [REFRESH_OPTION]: options.resolveEveryMs } : {}),
      ...options.channelOptions,
    };
    this.client = new grpc.Client(target, grpc.credentials.createInsecure(), channelOptions);
    this.health = new HealthClient(target, grpc.credentials.createInsecure(), channelOptions);
    this.deadlineMs = options.deadlineMs ?? 5_000;
    const meter = metrics.getMeter('@workauto/grpc');
    this.downGauge = meter.createGauge('workauto.downstream.down', {
      description: '1 while a downstream service is marked down by its health check',
    });
    this.shortCircuited = meter.createCounter('workauto.downstream.short_circuited', {
      description: 'Calls answered 503 without being tried (service down or circuit open)',
      unit: '{call}',
    });
    this.downGauge.record(0, { service: name });
    this.options = {
      errorThresholdPercentage: options.errorThresholdPercentage ?? 50,
      resetTimeoutMs: options.resetTimeoutMs ?? 5_000,
      volumeThreshold: options.volumeThreshold ?? 3,
      healthTimeoutMs: options.healthTimeoutMs ?? 1_000,
      healthRecheckMs: options.healthRecheckMs ?? 1_000,
      resolveEveryMs: options.resolveEveryMs ?? 2_000,
      maxInFlight: options.maxInFlight ?? 512,
      tenantMaxInFlight: options.tenantMaxInFlight ?? Math.max(1, Math.floor((options.maxInFlight ?? 512) / 4)),
      maxStreams: options.maxStreams ?? options.maxInFlight ?? 512,
    };
  }

  /** True while the service's health check fails: its calls answer 503 without being tried. */
  get isDown(): boolean {
    return this.down;
  }

  /** The service's addresses whose health check failed: calls go to the others until they answer again. */
  get addressesLeftOut(): string[] {
    return [...this.leftOut.keys()];
  }

  /**
   * One call. `signal` cancels it in flight (the service sees the cancel); the call then rejects
   * with the signal's reason, which never counts against the circuit. `onMetadata` gets the
   * response's initial metadata (e.g. that a keyed call was replayed).
   */
  call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, opts: CallOptions = {}): Promise<Res> {
    let settle: () => void;
    try {
      settle = this.admit(opts, 'call');
    } catch (err) {
      return Promise.reject(err);
    }
    const { signal } = opts;
    const deadline = new Date(Date.now() + (opts.deadlineMs ?? this.deadlineMs));
    const attempt = () =>
      new Promise<Res>((resolve, reject) => {
        const onAbort = () => {
          call.cancel();
          reject(signal!.reason);
        };
        const call = withoutCallerStack(() =>
          this.client.makeUnaryRequest(
            method.path,
            method.requestSerialize,
            method.responseDeserialize,
            request,
            opts.metadata ?? new grpc.Metadata(),
            { deadline },
            (err, response) => {
              signal?.removeEventListener('abort', onAbort);
              if (err) return reject(err);
              this.succeeded++;
              resolve(response as Res);
            },
          ),
        );
        signal?.addEventListener('abort', onAbort, { once: true });
        if (opts.onMetadata) call.on('metadata', opts.onMetadata);
      });
    return (this.breakerOf(method.path).fire(attempt, opts.tenant) as Promise<Res>)
      .finally(settle)
      .catch((err: unknown) => {
        if ((err as { code?: unknown }).code === 'EOPENBREAKER') {
          this.shortCircuited.add(1, { service: this.name, reason: 'circuit_open' });
          throw this.unavailable('circuit_open');
        }
        throw this.failure(err);
      });
  }

  /**
   * A server-streaming call: its messages as they arrive, read as the caller consumes them (the
   * service waits while the caller is behind). Started by the first read; ending the iteration
   * early (break, return, a throw) or aborting `signal` cancels the call, which the service sees.
   * The deadline bounds the whole stream. A down service, the in-flight cap and the failures'
   * mapping are those of `call`; a method's breaker is not, since a stream that failed after its
   * first messages says nothing about the next one (a hung service is found by the health check
   * its failure starts).
   */
  async *stream<Req, Res>(
    method: UnaryMethod<Req, Res>,
    request: Req,
    opts: CallOptions = {},
  ): AsyncGenerator<Res, void, undefined> {
    const settle = this.admit(opts, 'stream');
    const { signal } = opts;
    const call = withoutCallerStack(() =>
      this.client.makeServerStreamRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        opts.metadata ?? new grpc.Metadata(),
        { deadline: new Date(Date.now() + (opts.deadlineMs ?? this.deadlineMs)) },
      ),
    );
    readAheadOne(call);
    const onAbort = () => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const message of call) yield message as Res;
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw this.failure(err);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      call.cancel(); // a no-op once the status arrived; ends a stream the caller stopped reading
      settle();
    }
  }

  /**
   * Admits a call (or a stream) before it starts and returns what ends it (call it once). Refused:
   * the service is down, the caller gave up, too many calls are in flight (503), or the call's
   * tenant has its share of them (429).
   */
  private admit(opts: CallOptions, kind: 'call' | 'stream'): () => void {
    if (this.down) {
      this.shortCircuited.add(1, { service: this.name, reason: 'service_down' });
      throw this.unavailable('service_down');
    }
    if (opts.signal?.aborted) throw opts.signal.reason;
    const cap = kind === 'call' ? this.options.maxInFlight : this.options.maxStreams;
    if ((kind === 'call' ? this.inFlight : this.streams) >= cap) {
      this.shortCircuited.add(1, { service: this.name, reason: 'overloaded' });
      throw this.serviceError(
        grpc.status.UNAVAILABLE,
        'SERVICE_OVERLOADED',
        `the ${this.name} service has ${cap} ${kind === 'call' ? 'calls' : 'streams'} in flight from this caller, the most it takes at once; retry in a few seconds`,
      );
    }
    const { tenant } = opts;
    const held = tenant === undefined ? 0 : (this.tenantCalls.get(tenant) ?? 0);
    if (tenant !== undefined && held >= this.options.tenantMaxInFlight) {
      this.shortCircuited.add(1, { service: this.name, reason: 'tenant_share' });
      throw new DomainError(
        grpc.status.RESOURCE_EXHAUSTED,
        'TENANT_CALLS_LIMITED',
        `this tenant has ${this.options.tenantMaxInFlight} calls in flight to the ${this.name} service, the most one tenant may have at once; retry after one of them has finished`,
        {
          metadata: {
            service: this.name,
            limit_in_flight: String(this.options.tenantMaxInFlight),
            retry_after_seconds: '1',
          },
        },
      );
    }
    if (kind === 'call') this.inFlight++;
    else this.streams++;
    if (tenant !== undefined) {
      this.tenantCalls.set(tenant, held + 1);
      if (held + 1 >= BUSY_TENANT_CALLS) {
        this.busyTenants.delete(tenant);
        this.busyTenants.set(tenant, Date.now() + ROLLING_WINDOW_MS);
        if (this.busyTenants.size > 1_000) this.busyTenants.delete(this.busyTenants.keys().next().value!);
      }
    }
    let settled = false;
    return () => {
      if (settled) return;
      settled = true;
      if (kind === 'call') this.inFlight--;
      else this.streams--;
      if (tenant === undefined) return;
      const n = (this.tenantCalls.get(tenant) ?? 1) - 1;
      if (n > 0) this.tenantCalls.set(tenant, n);
      else this.tenantCalls.delete(tenant);
    };
  }

  /**
   * Whether a failed call counts against its method's circuit: a transport failure (the service
   * or the way to it is unwell), unless it is one busy tenant's alone. A tenant that had
   * BUSY_TENANT_CALLS or more calls in flight within the circuit's window, and whose calls time out
   * while no other tenant's (nor an untenanted call's) failed in that window, is queueing behind
   * its own requests; opening the circuit would refuse every other tenant for it. Its calls still
   * start a health check: a service that is really unwell is found by that.
   */
  private countsAgainstCircuit(path: string, err: unknown, tenant: string | undefined): boolean {
    if (!isTransportFailure(err)) return false;
    const now = Date.now();
    let recent = this.failures.get(path);
    if (!recent) this.failures.set(path, (recent = new Map<string, number>()));
    for (const [who, at] of recent) if (now - at > ROLLING_WINDOW_MS) recent.delete(who);
    const who = tenant ?? '';
    recent.delete(who);
    recent.set(who, now);
    if (recent.size > 64) recent.delete(recent.keys().next().value!);
    if (tenant === undefined || !this.isBusy(tenant, now)) return true;
    return recent.size > 1;
  }

  private isBusy(tenant: string, now: number): boolean {
    const until = this.busyTenants.get(tenant);
    if (until === undefined) return false;
    if (until > now) return true;
    this.busyTenants.delete(tenant);
    return false;
  }

  /** A failed call's error as callers get it: transport failures named after the service (and a health check started). */
  private failure(err: unknown): unknown {
    if (isTransportFailure(err)) {
      this.probe();
      return this.transportError(err as grpc.ServiceError);
    }
    if (isOversizedResponse(err)) return this.oversized(err as grpc.ServiceError);
    return err;
  }

  private breakerOf(path: string): Breaker {
    let breaker = this.breakers.get(path);
    if (!breaker) {
      breaker = new CircuitBreaker((call: () => Promise<unknown>, _tenant: string | undefined) => call(), {
        timeout: false, // the gRPC deadline bounds each call
        errorThresholdPercentage: this.options.errorThresholdPercentage,
        resetTimeout: this.options.resetTimeoutMs,
        volumeThreshold: this.options.volumeThreshold,
        rollingCountTimeout: ROLLING_WINDOW_MS,
        // Nothing reads the latency percentiles or the per-second snapshots: with them on, opossum keeps
        // every call's latency and sorts the window's latencies every second, per method.
        rollingPercentilesEnabled: false,
        enableSnapshots: false,
        // opossum passes the fire() arguments after the error (its types omit them): the call's tenant.
        errorFilter: ((err: unknown, _call: unknown, tenant: string | undefined) =>
          !this.countsAgainstCircuit(path, err, tenant)) as (err: unknown) => boolean,
      });
      this.breakers.set(path, breaker);
    }
    return breaker;
  }

  /** After a transport failure: which of the service's addresses are unwell (left out), and is every one? */
  private probe(): void {
    if (this.down || this.probing || this.closed) return;
    this.probing = true;
    const succeededBefore = this.succeeded;
    void this.checkAddresses().then((failing) => {
      this.probing = false;
      if (this.closed || !failing.all || this.succeeded > succeededBefore) return;
      this.down = true;
      this.downGauge.record(1, { service: this.name });
      this.untilHealthy(async () => {
        // Looked up again first: a service replaced while down answers at its new address.
        await this.discovery?.refresh();
        return !(await this.checkAddresses()).all;
      }, this.closing.signal).then(
        () => {
          if (this.closed) return;
          this.down = false;
          this.downGauge.record(0, { service: this.name });
          // The service answers again: its methods get traffic at once rather than after their reset timeout.
          for (const b of this.breakers.values()) b.close();
        },
        () => undefined, // closed
      );
    });
  }

  /**
   * Checks again every healthRecheckMs, in the background, until `healthy` resolves true; rejects
   * once `signal` aborts, or with what `healthy` throws.
   */
  private untilHealthy(healthy: () => Promise<boolean>, signal: AbortSignal): Promise<void> {
    return retry(
      async (attempt) => {
        // Attempt 1 is the check that found it failing: the first recheck comes after a wait.
        if (attempt === 1 || !(await healthy())) throw STILL_FAILING;
      },
      {
        backoff: { firstMs: this.options.healthRecheckMs, factor: 1 },
        retryable: (err) => err === STILL_FAILING,
        signal,
        clock: backgroundClock,
      },
    );
  }

  /**
   * Checks each known address at once. One that fails is left out of the picks (when others
   * remain) and checked again until it answers; one that answers is offered again.
   */
  private async checkAddresses(): Promise<{ all: boolean }> {
    const addresses = this.discovery?.addresses.length ? this.discovery.addresses : [undefined];
    const timeoutMs = this.options.healthTimeoutMs;
    let results = await Promise.all(addresses.map((a) => this.checkAddress(a, timeoutMs)));
    // Every check timed out: this process may be the one short of CPU (its timers fired before it
    // read the answers). Asked once more with twice the time before any verdict; a check that times
    // out while others answer is the address's own failure.
    if (results.every((r) => r.timedOut))
      results = await Promise.all(addresses.map((a) => this.checkAddress(a, 2 * timeoutMs)));
    let failing = 0;
    addresses.forEach((address, i) => {
      if (results[i]!.state !== 'failing') {
        if (address) this.offerAgain(address);
        return;
      }
      failing++;
      if (address && addresses.length > 1) this.leaveOut(address);
    });
    return { all: failing === addresses.length };
  }

  private leaveOut(address: string): void {
    if (this.leftOut.has(address) || this.closed) return;
    this.discovery!.exclude(address);
    // The methods' recent transport failures were this address's: its peers take the calls now.
    for (const b of this.breakers.values()) b.close();
    const answered = new AbortController();
    this.leftOut.set(address, answered);
    this.untilHealthy(
      async () => {
        // Gone from DNS (the pod was replaced): nothing more to check.
        if (!this.discovery!.addresses.includes(address)) throw GONE;
        return (await this.checkAddress(address, this.options.healthTimeoutMs)).state !== 'failing';
      },
      AbortSignal.any([this.closing.signal, answered.signal]),
    ).then(
      () => this.offerAgain(address),
      (err: unknown) => {
        if (err === GONE) this.leftOut.delete(address);
      },
    );
  }

  private offerAgain(address: string): void {
    this.leftOut.get(address)?.abort();
    this.leftOut.delete(address);
    this.discovery?.include(address);
  }

  /** One address's health (the channel's target when none is given). */
  private async checkAddress(
    address: string | undefined,
    timeoutMs: number,
  ): Promise<{ state: 'serving' | 'failing' | 'unknown'; timedOut: boolean }> {
    if (!address) return this.healthCheck(this.health, timeoutMs);
    const client = new HealthClient(addressTarget(address), grpc.credentials.createInsecure(), {
      'grpc.enable_channelz': 0,
    });
    try {
      return await this.healthCheck(client, timeoutMs);
    } finally {
      client.close();
    }
  }

  /** The service's gRPC health check: 'failing' on no answer, NOT_SERVING or no connection; 'unknown' when it has no health service. */
  async checkHealth(): Promise<'serving' | 'failing' | 'unknown'> {
    return (await this.healthCheck(this.health, this.options.healthTimeoutMs)).state;
  }

  private healthCheck(
    client: grpc.Client,
    timeoutMs: number,
  ): Promise<{ state: 'serving' | 'failing' | 'unknown'; timedOut: boolean }> {
    return new Promise((resolve) => {
      (
        client as unknown as {
          check: (
            req: object,
            opts: grpc.CallOptions,
            cb: (e: grpc.ServiceError | null, r?: { status?: string }) => void,
          ) => void;
        }
      ).check({ service: '' }, { deadline: new Date(Date.now() + timeoutMs) }, (err, res) =>
        resolve({
          state: err
            ? err.code === grpc.status.UNIMPLEMENTED
              ? 'unknown'
              : 'failing'
            : res?.status === 'SERVING'
              ? 'serving'
              : 'failing',
          timedOut: err?.code === grpc.status.DEADLINE_EXCEEDED,
        }),
      );
    });
  }

  /** A failure of the way to the service, naming it (ErrorInfo metadata `service`, and `more`). */
  private serviceError(
    code: grpc.status,
    reason: string,
    message: string,
    more: Record<string, string> = {},
  ): DomainError {
    return new DomainError(code, reason, message, { metadata: { service: this.name, ...more } });
  }

  /**
   * The service answered more than the client receives (4 MiB): a bug of that rpc (lists stop their
   * pages below it, feeds stream), which no retry fixes, so not grpc-js's RESOURCE_EXHAUSTED ("retry later").
   */
  private oversized(err: grpc.ServiceError): DomainError {
    return this.serviceError(
      grpc.status.INTERNAL,
      'RESPONSE_TOO_LARGE',
      `the ${this.name} service answered more than a response may hold (${err.details}); report the request id`,
    );
  }

  /**
   * The service cannot be called. `cause` (ErrorInfo metadata) says why, for whoever reads a 503:
   * `service_down` (every address failed its health checks), `circuit_open` (the method's recent
   * calls failed), `no_answer` (this call found no connection or got none back).
   */
  private unavailable(cause: 'service_down' | 'circuit_open' | 'no_answer'): DomainError {
    return this.serviceError(
      grpc.status.UNAVAILABLE,
      'SERVICE_UNAVAILABLE',
      `the ${this.name} service is unavailable; retry in a few seconds`,
      { cause },
    );
  }

  /**
   * grpc-js's own status (no details: the service did not answer) named after the service, so the
   * client sees which one failed; a status the service sent with details travels on unchanged.
   */
  private transportError(err: grpc.ServiceError): unknown {
    if (decodeStatusDetails(err).reason) return err;
    if (isBrokenConnection(err)) {
      return this.serviceError(
        grpc.status.UNAVAILABLE,
        'SERVICE_UNAVAILABLE',
        `the connection to the ${this.name} service was lost before it answered (it is overloaded or restarting); retry in a few seconds — a write may have been applied, so retry a POST with the same Idempotency-Key`,
      );
    }
    if (err.code === grpc.status.DEADLINE_EXCEEDED) {
      return this.serviceError(
        grpc.status.DEADLINE_EXCEEDED,
        'DEADLINE_EXCEEDED',
        `the ${this.name} service did not answer in time; retry later`,
      );
    }
    return this.unavailable('no_answer');
  }

  /** Re-raises a downstream failure as the same DomainError, so it travels on unchanged. */
  static rethrow(err: unknown): never {
    if (
      err &&
      typeof err === 'object' &&
      'code' in err &&
      typeof (err as grpc.ServiceError).code === 'number' &&
      'metadata' in err
    ) {
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

  close(): void {
    this.closed = true;
    this.closing.abort();
    this.discovery?.close();
    for (const b of this.breakers.values()) b.shutdown();
    this.client.close();
    this.health.close();
  }
}
