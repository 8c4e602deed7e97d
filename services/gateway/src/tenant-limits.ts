/**
 * What one tenant may take, however many credentials it uses: requests in flight on this replica
 * (so its slow calls cannot fill the calls each service takes at once from this replica, and leave
 * the other tenants 503 SERVICE_OVERLOADED) and requests per minute across every gateway replica
 * (the per-credential limit multiplies with its members' keys; counted by the shared RateCounter).
 * Both pass: a refusal is a 429 with Retry-After.
 */
import * as grpc from '@grpc/grpc-js';
import { CostPacer } from './cost.js';
import { GatewayError, retryAfterSeconds } from './errors.js';
import type { RateCounter } from './shared-counter.js';

export interface TenantLimitOptions {
  /** Requests of one tenant in flight at once on this replica (GATEWAY_TENANT_CONCURRENCY). */
  concurrency: number;
  /** Requests of one tenant per minute, all gateway replicas together (RATE_LIMIT_PER_TENANT_PER_MINUTE). */
  perMinute: number;
}

export class TenantLimits {
  private readonly inFlight = new Map<string, number>();
  private readonly pace: CostPacer;

  constructor(
    readonly options: TenantLimitOptions,
    private readonly counter: RateCounter,
  ) {
    this.pace = new CostPacer(options.perMinute);
  }

  /**
   * Admits one request of the tenant and returns what ends it (call it once); a 429 when the tenant
   * is at a limit. `cost` is what the request takes of the tenant's budget per minute (cost.ts); the
   * units past its first are paced on this replica (CostPacer).
   */
  async admit(tenant: string, cost = 1): Promise<() => void> {
    const { concurrency, perMinute } = this.options;
    const held = this.inFlight.get(tenant) ?? 0;
    if (held >= concurrency)
      throw limited(
        'TENANT_CONCURRENCY_LIMITED',
        `this tenant has ${concurrency} requests in flight on this gateway, the most it may have at once; retry after one of them has finished`,
        { limit_in_flight: String(concurrency) },
      );
    const paced = this.pace.take(tenant, cost - 1);
    if (!paced.ok)
      throw limited(
        'TENANT_RATE_LIMITED',
        `this tenant's large writes and recurring series come faster than its budget of ${perMinute} a minute allows on this gateway (a second's worth at once, then at its rate); retry after ${paced.retryAfterSeconds} s`,
        { limit_per_minute: String(perMinute), retry_after_seconds: String(paced.retryAfterSeconds) },
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
    const { allowed, resetTime } = await this.counter.take(`tenant:${tenant}`, perMinute, cost);
    if (!allowed) {
      this.pace.giveBack(tenant, cost - 1);
      release();
      const retryAfter = retryAfterSeconds(resetTime.getTime() - Date.now());
      throw limited(
        'TENANT_RATE_LIMITED',
        `this tenant made ${perMinute} requests this minute, the most it may make; retry after ${retryAfter} s`,
        { limit_per_minute: String(perMinute), retry_after_seconds: String(retryAfter) },
      );
    }
    return release;
  }
}

/** A 429; its Retry-After is metadata.retry_after_seconds, or 1 s without one (toHttpError). */
function limited(reason: string, message: string, metadata: Record<string, string>): GatewayError {
  return new GatewayError(grpc.status.RESOURCE_EXHAUSTED, reason, message, undefined, { metadata });
}
