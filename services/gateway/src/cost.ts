/**
 * What a request costs in its tenant's per-minute budget (RATE_LIMIT_PER_TENANT_PER_MINUTE): one
 * unit, plus units for the work a write makes a service and its database do beyond an ordinary
 * request's (docs/operations.md, "Fairness between tenants", the cost rows). The per-credential
 * limit counts requests; the tenant's budget counts cost, so a tenant at its full rate of heavy
 * writes makes proportionally fewer of them.
 */

/** A write's body is free up to this size; each further started block of it costs one unit. */
export const BODY_UNIT_BYTES = 16 * 1024;

/**
 * A write that sets a recurrence rule (`rrule`: an event series, a recurring task) makes its
 * service expand and index the series' occurrences (hundreds of rows for a daily series, up to
 * 2,000), about fifty ordinary writes' worth of CPU and database work.
 */
export const RECURRENCE_UNITS = 50;

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
  return Buffer.byteLength(JSON.stringify(req.body) ?? '');
}
