/**
 * Streams one tenant may hold open on this gateway replica at once (docs/operations.md, "Fairness
 * between tenants"): a streamed body (an export, a calendar feed) and a Server-Sent Events stream
 * each keep a downstream stream, a service's reads and buffers for as long as the client reads,
 * so a tenant's streams are capped apart from its requests. Past the cap a 429 with Retry-After.
 */
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
        {
          headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
          metadata: { limit_streams: String(limit), retry_after_seconds: String(RETRY_AFTER_SECONDS) },
        },
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
