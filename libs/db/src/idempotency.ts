/**
 * Idempotency-Key in the service, with the write (docs/api.md, Idempotency; docs/service-pattern.md,
 * Transactions). The gRPC kit runs a keyed call's handler inside runKeyed; every withTransaction
 * of that call then takes part:
 * - the call's first transaction records the key right after BEGIN. A key that a finished call
 *   recorded makes this call replay that call's response instead (the transaction rolls back, the
 *   handler's work is not done again); a key recorded by a transaction still running makes the
 *   INSERT wait for it (PostgreSQL's unique index), then replay its response, or go on as the first
 *   if it rolled back;
 * - each transaction stores the call's response before COMMIT when its result is that response
 *   (the usual `return withTransaction(…)`), so key, write and response commit together; a handler
 *   that builds its response after its last transaction has it stored just after.
 * A call without a transaction records nothing: it wrote nothing here.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { retry } from '@workauto/retry';

/** The folder of the shared migration (idempotency_records), applied by every service after the outbox's. */
export const IDEMPOTENCY_MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** How long records are kept (the API's promise: a repeat within 24 hours). */
const RETENTION = '24 hours';

/** What a keyed call records, as the gRPC kit describes it. */
export interface KeyedWrite {
  /** The caller (tenant and actor): a key is the caller's own. */
  scope: string;
  key: string;
  /** Of the rpc and its request: the same key with another request is refused. */
  fingerprint: string;
  /** The call's response in its stored (sealed) form, when a transaction's result is that response; else undefined. */
  storedForm(result: unknown): string | undefined;
  /** Whether the call's response is the transaction result whose stored form was recorded (nothing more to store). */
  recorded(result: unknown, response: unknown): boolean;
}

/** A keyed call's outcome: its handler's response, or the first call's stored response (replayed). */
export type KeyedOutcome<T> = { replayed: false; response: T } | { replayed: true; stored: string };

/** The key came with another request than the one that recorded it. */
export class IdempotencyKeyReusedError extends Error {
  override name = 'IdempotencyKeyReusedError';
}

/** The call that recorded the key has not stored its response (yet): it is still finishing, or it stopped. */
export class IdempotencyKeyInUseError extends Error {
  override name = 'IdempotencyKeyInUseError';
  constructor(
    /** The record is older than anything still running could be: the first call stopped after its write. */
    readonly abandoned: boolean,
  ) {
    super(abandoned ? 'the response of the first request with this key was lost' : 'the first request is finishing');
  }
}

/** Thrown inside the transaction to roll it back and replay instead (never leaves runKeyed). */
class Replay extends Error {
  constructor(readonly stored: string | null) {
    super('replay');
  }
}

interface Scope {
  write: KeyedWrite;
  /** The record is committed (by one of this call's transactions). */
  claimed: boolean;
  /** Set by the committed transaction that recorded it: what later steps need. */
  pool?: pg.Pool;
  recordedResult?: { result: unknown };
  /** Closed once the handler settled: work it left behind is not part of the call. */
  open: boolean;
}

const calls = new AsyncLocalStorage<Scope>();

/** A statement stopped by statement_timeout (57014): here, a wait on another call's uncommitted record. */
const QUERY_CANCELED = '57014';
/** How long a call waits for the response of a committed record before answering "in use". */
const RESPONSE_WAIT_MS = 2_000;
/** A record without a response older than this was left by a call that stopped after its write. */
const ABANDONED_AFTER = '1 minute';

/**
 * Runs a keyed call's handler: its transactions record the key (above). Resolves to the handler's
 * response, or to the stored response of the call that recorded the key first; throws
 * IdempotencyKeyReusedError or IdempotencyKeyInUseError.
 */
export async function runKeyed<T>(write: KeyedWrite, handler: () => Promise<T>): Promise<KeyedOutcome<T>> {
  const scope: Scope = { write, claimed: false, open: true };
  let response: T;
  try {
    response = await calls.run(scope, handler);
  } catch (err) {
    if (!(err instanceof Replay)) throw err;
    if (err.stored !== null) return { replayed: true, stored: err.stored };
    return { replayed: true, stored: await storedResponse(scope) };
  } finally {
    scope.open = false;
  }
  if (scope.claimed && scope.pool && !(scope.recordedResult && write.recorded(scope.recordedResult.result, response))) {
    // Built after the last transaction: stored now. Should this fail, a retry finds the record
    // without a response and is told so (IdempotencyKeyInUseError) rather than run again.
    const stored = write.storedForm(response);
    if (stored !== undefined)
      await scope.pool
        .query('UPDATE idempotency_records SET response = $3 WHERE scope = $1 AND key = $2', [
          write.scope,
          write.key,
          stored,
        ])
        .catch(() => undefined);
  }
  return { replayed: false, response };
}

/** The keyed call this transaction belongs to, if any (withTransaction). */
export function keyedCall(): KeyedTransaction | undefined {
  const scope = calls.getStore();
  return scope?.open ? new KeyedTransaction(scope) : undefined;
}

/** One transaction's part in a keyed call. */
export class KeyedTransaction {
  private claimedHere = false;
  private recorded: { result: unknown } | undefined;

  constructor(private readonly scope: Scope) {}

  /** After BEGIN: records the key (the call's first transaction), or throws to replay the first call's response. */
  async begin(tx: pg.PoolClient): Promise<void> {
    if (this.scope.claimed) return;
    const { scope, key, fingerprint } = this.scope.write;
    let claimed;
    try {
      // Waits while another call's transaction holds an uncommitted record of the key.
      claimed = await tx.query(
        `INSERT INTO idempotency_records (scope, key, fingerprint) VALUES ($1, $2, $3)
         ON CONFLICT (scope, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, response = NULL, created_at = now()
           WHERE idempotency_records.created_at < now() - interval '${RETENTION}'
         RETURNING 1`,
        [scope, key, fingerprint],
      );
    } catch (err) {
      // That transaction ran past the statement timeout: it is still running.
      if ((err as { code?: unknown }).code === QUERY_CANCELED) throw new IdempotencyKeyInUseError(false);
      throw err;
    }
    if (claimed.rowCount) {
      this.claimedHere = true;
      return;
    }
    const { rows } = await tx.query<{ fingerprint: string; response: string | null }>(
      'SELECT fingerprint, response FROM idempotency_records WHERE scope = $1 AND key = $2',
      [scope, key],
    );
    const row = rows[0];
    if (row && row.fingerprint !== fingerprint) throw new IdempotencyKeyReusedError('another request holds this key');
    throw new Replay(row?.response ?? null);
  }

  /** Before COMMIT: stores the call's response when this transaction's result is it. */
  async beforeCommit(tx: pg.PoolClient, result: unknown): Promise<void> {
    const stored = this.scope.write.storedForm(result);
    if (stored === undefined) return;
    await tx.query('UPDATE idempotency_records SET response = $3 WHERE scope = $1 AND key = $2', [
      this.scope.write.scope,
      this.scope.write.key,
      stored,
    ]);
    this.recorded = { result };
  }

  /** After COMMIT. */
  committed(pool: pg.Pool): void {
    if (this.claimedHere) {
      this.scope.claimed = true;
      this.scope.pool = pool;
    }
    if (this.recorded) this.scope.recordedResult = this.recorded;
  }

  /** The pool of the call's record, for the wait of a replay. */
  remember(pool: pg.Pool): void {
    this.scope.pool ??= pool;
  }
}

/** The record is there, its call still running: look again. */
const NOT_STORED_YET = new Error('the response is not stored yet');

/** The response of a record committed without one: waits a little (polls every 50 ms, 2 s at most) for its call to store it. */
async function storedResponse(scope: Scope): Promise<string> {
  const { pool, write } = scope;
  if (!pool) throw new IdempotencyKeyInUseError(false);
  return retry(
    async () => {
      const { rows } = await pool.query<{ response: string | null; abandoned: boolean }>(
        `SELECT response, created_at < now() - interval '${ABANDONED_AFTER}' AS abandoned
           FROM idempotency_records WHERE scope = $1 AND key = $2`,
        [write.scope, write.key],
      );
      const row = rows[0];
      if (row?.response) return row.response;
      if (!row || row.abandoned) throw new IdempotencyKeyInUseError(row?.abandoned ?? false);
      throw NOT_STORED_YET;
    },
    {
      backoff: { firstMs: 50, factor: 1 },
      retryable: (err) => err === NOT_STORED_YET,
      timeoutMs: RESPONSE_WAIT_MS,
      timedOut: () => new IdempotencyKeyInUseError(false),
    },
  );
}

/** Deletes records past their 24 h, at most `batch` at a time; resolves to how many went. */
export async function deleteExpiredIdempotencyRecords(pool: pg.Pool, batch = 10_000): Promise<number> {
  const { rowCount } = await pool.query(
    `DELETE FROM idempotency_records WHERE (scope, key) IN (
       SELECT scope, key FROM idempotency_records WHERE created_at < now() - interval '${RETENTION}' LIMIT $1)`,
    [batch],
  );
  return rowCount ?? 0;
}
