/**
 * What one tenant may take, however many credentials it uses: requests in flight on this replica
 * (so its slow calls cannot fill the calls each service takes at once from this replica, and leave
 * the other tenants 503 SERVICE_OVERLOADED) and requests per minute across every gateway replica
 * (the per-credential limit multiplies with its members' keys; counted by the shared RateCounter).
 * Both pass: a refusal is a 429 with Retry-After.
 */
import * as grpc from '@grpc/grpc-js';
import { GatewayError } from './errors.js';
import type { RateCounter } from './shared-counter.js';

export interface TenantLimitOptions {
  /** Requests of one tenant in flight at once on this replica (GATEWAY_TENANT_CONCURRENCY). */
  concurrency: number;
  /** Requests of one tenant per minute, all gateway replicas together (RATE_LIMIT_PER_TENANT_PER_MINUTE). */
  perMinute: number;
}

export class TenantLimits {
  private readonly inFlight = new Map<string, number>();

  constructor(
    readonly options: TenantLimitOptions,
    private readonly counter: RateCounter,
  ) {}

  /** Admits one request of the tenant and returns what ends it (call it once); a 429 when the tenant is at a limit. */
  async admit(tenant: string): Promise<() => void> {
    const { concurrency, perMinute } = this.options;
    const held = this.inFlight.get(tenant) ?? 0;
    if (held >= concurrency)
      throw limited(
        'TENANT_CONCURRENCY_LIMITED',
        `this tenant has ${concurrency} requests in flight on this gateway, the most it may have at once; retry after one of them has finished`,
        1,
        { limit_in_flight: String(concurrency) },
      );
    this.inFlight.set(tenant, held + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const n = (this.inFlight.get(tenant) ?? 1) - 1;
      if (n > 0) this.inFlight.set(tenant, n);
      else this.inFlight.delete(tenant);
    };
    const { allowed, resetTime } = await this.counter.take(`tenant:${tenant}`, perMinute);
    if (!allowed) {
      release();
      const retryAfter = Math.max(1, Math.ceil((resetTime.getTime() - Date.now()) / 1000));
      throw limited(
        'TENANT_RATE_LIMITED',
        `this tenant made ${perMinute} requests this minute, the most it may make; retry after ${retryAfter} s`,
        retryAfter,
        { limit_per_minute: String(perMinute), retry_after_seconds: String(retryAfter) },
      );
    }
    return release;
  }
}

function limited(reason: string, message: string, retryAfter: number, metadata: Record<string, string>): GatewayError {
  return new GatewayError(grpc.status.RESOURCE_EXHAUSTED, reason, message, undefined, {
    headers: { 'Retry-After': String(retryAfter) },
    metadata,
  });
}
