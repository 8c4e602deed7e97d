/**
 * What a request costs in its tenant's per-minute budget (RATE_LIMIT_PER_TENANT_PER_MINUTE): one
 * unit, plus units for the work a write makes a service and its database do beyond an ordinary
 * request's (docs/operations.md, "Fairness between tenants", the cost rows). The per-credential
 * limit counts requests; the tenant's budget counts cost, so a tenant at its full rate of heavy
 * writes makes proportionally fewer of them.
 */
import { retryAfterSeconds } from './errors.js';

/** A write's body is free up to this size; each further started block of it costs one unit. */
const BODY_UNIT_BYTES = 8 * 1024;

/**
 * A write that sets a recurrence rule (`rrule`: an event series, a recurring task) makes its
 * service expand and index the series' occurrences (hundreds of rows for a daily series, up to
 * 2,000): about fifty ordinary writes' worth of CPU and database work.
 */
const RECURRENCE_UNITS = 50;

interface CostedRequest {
  method: string;
  body?: unknown;
  get(name: string): string | undefined;
}

/** The units the request costs: 1 for a read or an ordinary write. */
export function requestCost(req: CostedRequest): number {
  if (req.method === 'GET' || req.method === 'DELETE' || req.body === undefined || req.body === null) return 1;
  let units = 1;
  const bytes = bodyBytes(req);
  if (bytes > BODY_UNIT_BYTES) units += Math.ceil((bytes - BODY_UNIT_BYTES) / BODY_UNIT_BYTES);
  const rrule = (req.body as { rrule?: unknown }).rrule;
  if (typeof rrule === 'string' && rrule.trim() !== '') units += RECURRENCE_UNITS;
  return units;
}

/** The body's size as sent (Content-Length), or as its JSON when it came chunked. */
function bodyBytes(req: CostedRequest): number {
  const declared = Number(req.get('content-length'));
  if (Number.isFinite(declared) && declared > 0) return declared;
  // JSON.stringify answers undefined for no body, though its type says string.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
  return Buffer.byteLength(JSON.stringify(req.body) ?? '');
}

/**
 * The pace of a tenant's heavy work on this replica: the units a request costs beyond the first (a
 * large body's, a recurring series') are drawn from a bucket per tenant that holds one second of the
 * budget per minute (and at least two series' worth) and refills at the budget's rate (for the
 * default 6,000: 102 units, 100 a second). The budget per minute bounds how much heavy work a
 * tenant does in a minute; the bucket bounds how fast, so a tenant cannot spend its minute's
 * budget of large writes or series in its first seconds, which would take the services' and the
 * database's capacity from every other tenant meanwhile. A bucket of a tenth of the minute (600
 * units: 42 notes of 100 KB at once) did: other tenants' p99 went from 14 to 418-528 ms in the
 * noisy-neighbour test's first second of such writes (deploy/embedded e2e, "notes of 100 KB").
 * Ordinary requests are not paced.
 */
export class CostPacer {
  private readonly buckets = new Map<string, { units: number; at: number }>();
  private readonly capacity: number;
  private readonly perMs: number;

  constructor(
    perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.capacity = Math.max(2 * (RECURRENCE_UNITS + 1), perMinute / 60);
    this.perMs = perMinute / 60_000;
  }

  /**
   * Takes `units` of the tenant's bucket, or answers how many seconds until they are there (the
   * request is then refused: nothing is taken).
   */
  take(tenant: string, units: number): { ok: true } | { ok: false; retryAfterSeconds: number } {
    if (units <= 0) return { ok: true };
    const now = this.now();
    const bucket = this.buckets.get(tenant) ?? { units: this.capacity, at: now };
    bucket.units = Math.min(this.capacity, bucket.units + (now - bucket.at) * this.perMs);
    bucket.at = now;
    if (bucket.units < units) {
      this.buckets.set(tenant, bucket);
      return { ok: false, retryAfterSeconds: retryAfterSeconds((units - bucket.units) / this.perMs) };
    }
    bucket.units -= units;
    this.buckets.delete(tenant); // kept in order of use: the oldest are evicted first
    this.buckets.set(tenant, bucket);
    if (this.buckets.size > 10_000) this.buckets.delete(this.buckets.keys().next().value!);
    return { ok: true };
  }

  /** Gives back units taken for a request that was refused after all (by the budget per minute). */
  giveBack(tenant: string, units: number): void {
    const bucket = units > 0 ? this.buckets.get(tenant) : undefined;
    if (bucket) bucket.units = Math.min(this.capacity, bucket.units + units);
  }
}
