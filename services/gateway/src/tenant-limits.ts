/**
 * What one tenant may take of a gateway replica, however many credentials it uses: requests in
 * flight (so its slow calls cannot fill the calls each service takes at once from this replica,
 * and leave the other tenants 503 SERVICE_OVERLOADED) and requests per minute (the per-credential
 * limit multiplies with its members' keys). Both pass: a refusal is a 429 with Retry-After.
 */
import * as grpc from '@grpc/grpc-js';
import { MemoryStore } from 'express-rate-limit';
import { CostPacer } from './cost.js';
import { GatewayError } from './errors.js';

const WINDOW_MS = 60_000;

export interface TenantLimitOptions {
  /** Requests of one tenant in flight at once on this replica (GATEWAY_TENANT_CONCURRENCY). */
  concurrency: number;
  /** Requests of one tenant per minute on this replica (RATE_LIMIT_PER_TENANT_PER_MINUTE). */
  perMinute: number;
}

export class TenantLimits {
  private readonly inFlight = new Map<string, number>();
  private readonly minute = new MemoryStore();
  private readonly pace: CostPacer;

  constructor(readonly options: TenantLimitOptions) {
    this.minute.init({ windowMs: WINDOW_MS } as Parameters<MemoryStore['init']>[0]);
    this.pace = new CostPacer(options.perMinute);
  }

  /**
   * Admits one request of the tenant and returns what ends it (call it once); a 429 when the tenant
   * is at a limit. `cost` is what the request takes of the tenant's budget per minute (cost.ts).
   */
  async admit(tenant: string, cost = 1): Promise<() => void> {
    const { concurrency, perMinute } = this.options;
    const held = this.inFlight.get(tenant) ?? 0;
    if (held >= concurrency)
      throw limited(
        'TENANT_CONCURRENCY_LIMITED',
        `this tenant has ${concurrency} requests in flight on this gateway, the most it may have at once; retry after one of them has finished`,
        1,
        { limit_in_flight: String(concurrency) },
      );
    const paced = this.pace.take(tenant, cost - 1);
    if (!paced.ok)
      throw limited(
        'TENANT_RATE_LIMITED',
        `this tenant's large writes and recurring series come faster than its budget of ${perMinute} a minute allows on this gateway (a tenth of it at once, then at its rate); retry after ${paced.retryAfterSeconds} s`,
        paced.retryAfterSeconds,
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
    let { totalHits, resetTime } = await this.minute.increment(tenant);
    // A heavy request takes its further units one by one (the store counts hits)…
    let charged = 1;
    for (; charged < cost && totalHits <= perMinute; charged++)
      ({ totalHits, resetTime } = await this.minute.increment(tenant));
    if (totalHits > perMinute) {
      // …and gives them back when refused: a refusal costs one unit, as any refused request.
      for (; charged > 1; charged--) await this.minute.decrement(tenant);
      this.pace.giveBack(tenant, cost - 1);
      release();
      const retryAfter = Math.max(1, Math.ceil(((resetTime?.getTime() ?? Date.now() + WINDOW_MS) - Date.now()) / 1000));
      throw limited(
        'TENANT_RATE_LIMITED',
        `this tenant made ${perMinute} requests this minute on this gateway, the most it may make; retry after ${retryAfter} s`,
        retryAfter,
        { limit_per_minute: String(perMinute), retry_after_seconds: String(retryAfter) },
      );
    }
    return release;
  }

  stop(): void {
    this.minute.shutdown();
  }
}

function limited(reason: string, message: string, retryAfter: number, metadata: Record<string, string>): GatewayError {
  return new GatewayError(grpc.status.RESOURCE_EXHAUSTED, reason, message, undefined, {
    headers: { 'Retry-After': String(retryAfter) },
    metadata,
  });
}
