/**
 * Streams one tenant may hold open on this gateway replica at once (docs/operations.md, "Fairness
 * between tenants"): a streamed body (an export, a calendar feed) and a Server-Sent Events stream
 * each keep a downstream stream, a service's reads and buffers for as long as the client reads,
 * so a tenant's streams are capped apart from its requests. Past the cap a 429 with Retry-After.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { GatewayError } from './errors.js';

export type StreamKind = 'body' | 'events';

export interface StreamSlotLimits {
  /** Streamed bodies (exports, feeds) of one tenant at once (GATEWAY_TENANT_STREAMS). */
  body: number;
  /** Server-Sent Events streams of one tenant at once (GATEWAY_TENANT_EVENT_STREAMS). */
  events: number;
}

/** How long a client refused a slot waits before it asks again: streams end as their clients finish reading. */
const RETRY_AFTER_SECONDS = 5;

const WHAT: Record<StreamKind, { text: string; variable: string }> = {
  body: { text: 'streamed responses (exports, calendar feeds)', variable: 'GATEWAY_TENANT_STREAMS' },
  events: { text: 'event streams', variable: 'GATEWAY_TENANT_EVENT_STREAMS' },
};

export class StreamSlots {
  private readonly open = new Map<string, number>();

  constructor(private readonly limits: StreamSlotLimits) {}

  /** A slot for one of the tenant's streams, and what gives it back (call it once); a 429 at the cap. */
  acquire(tenant: string, kind: StreamKind): () => void {
    const key = `${kind}:${tenant}`;
    const held = this.open.get(key) ?? 0;
    const limit = this.limits[kind];
    if (held >= limit)
      throw new GatewayError(
        grpc.status.RESOURCE_EXHAUSTED,
        'TENANT_STREAMS_LIMITED',
        `this tenant has ${limit} ${WHAT[kind].text} open on this gateway, the most it may have at once; retry after one of them has ended`,
        undefined,
        { metadata: { limit_streams: String(limit), retry_after_seconds: String(RETRY_AFTER_SECONDS) } },
      );
    this.open.set(key, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.open.get(key) ?? 1) - 1;
      if (n > 0) this.open.set(key, n);
      else this.open.delete(key);
    };
  }
}

/**
 * How fast one tenant's streams may send, all of them together on this replica: a bucket of bytes
 * per tenant (STREAM_BURST_BYTES at once, then STREAM_BYTES_PER_SECOND). A stream writes a chunk
 * once its bytes are there, and reads the next only then: the service renders (a feed) or reads
 * and formats (an export) no faster for one tenant, however many streams it opens, so its streams
 * take a bounded share of the service's CPU and database.
 */
export class StreamPace {
  private readonly buckets = new Map<string, { bytes: number; at: number }>();

  constructor(
    private readonly bytesPerSecond = STREAM_BYTES_PER_SECOND,
    private readonly burstBytes = STREAM_BURST_BYTES,
    /** The time it reads and waits on (tests move a ManualClock of @workauto/testing). */
    private readonly clock: PaceClock = SYSTEM_CLOCK,
  ) {}

  /**
   * Waits until the tenant may send `bytes` more, and takes them; resolves at once within the
   * bucket, throws the signal's reason once it aborts.
   */
  async spend(tenant: string, bytes: number, signal: AbortSignal): Promise<void> {
    const t = this.clock.now().getTime();
    const bucket = this.buckets.get(tenant) ?? { bytes: this.burstBytes, at: t };
    bucket.bytes = Math.min(this.burstBytes, bucket.bytes + ((t - bucket.at) * this.bytesPerSecond) / 1_000);
    bucket.at = t;
    bucket.bytes -= bytes; // taken now: the tenant's other streams wait behind this one
    this.buckets.delete(tenant);
    this.buckets.set(tenant, bucket);
    if (this.buckets.size > 10_000) this.buckets.delete(this.buckets.keys().next().value!);
    if (bucket.bytes < 0) await this.clock.sleep(Math.ceil((-bucket.bytes * 1_000) / this.bytesPerSecond), signal);
    signal.throwIfAborted();
  }
}

interface PaceClock {
  now(): Date;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

const SYSTEM_CLOCK: PaceClock = {
  now: () => new Date(),
  sleep: (ms, signal) => sleep(ms, undefined, { signal }).catch(() => undefined),
};

/**
 * A tenant's streams send 2 MiB a second together per gateway replica, after a first 1 MiB at once:
 * a feed of a few MB in a second or two, an export of 100,000 audit entries (about 25 MB) in 13 s,
 * within its 60 s deadline; rendering 2 MiB a second of iCalendar or CSV takes a service a small
 * part of a core.
 */
const STREAM_BYTES_PER_SECOND = 2 * 1024 * 1024;
const STREAM_BURST_BYTES = 1024 * 1024;
