/** PostgreSQL error codes that repos turn into domain errors. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string } | null | undefined;
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

export function isForeignKeyViolation(err: unknown): boolean {
  return (err as { code?: string } | null | undefined)?.code === '23503';
}

/**
 * The database cannot be reached: connection exceptions (class 08), the server shutting down or
 * starting (57P01–57P03), a database not accepting connections (55000 from ALLOW_CONNECTIONS
 * false), too many connections (53300), or the socket failing under the driver, including a name
 * that does not resolve yet (a cluster's DNS record appears after the pods that need it).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (
    /^08[0-9A-Z]{3}$/.test(code) ||
    [
      ...['57P01', '57P02', '57P03', '53300', '55000'],
      ...['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'],
    ].includes(code)
  )
    return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(
    message,
  );
}

/** A `FOR UPDATE NOWAIT` found the row locked by another transaction (55P03 lock_not_available). */
export function isLockNotAvailable(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '55P03';
}

/** SQLSTATEs of a transaction PostgreSQL aborted because of another one: running it again may succeed. */
const CONCURRENCY_FAILURES = new Set(['40P01' /* deadlock_detected */, '40001' /* serialization_failure */]);

/** The transaction lost a deadlock or a serialization conflict (40P01, 40001). */
export function isConcurrencyFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONCURRENCY_FAILURES.has(code);
}
