/**
 * Idempotency-Key on every write (POST, PATCH, PUT, DELETE; docs/api.md, Idempotency), in two
 * places. Here, the gateway's record: the first response (status and body, even an error) is stored
 * encrypted and replayed to a repeat with the same key by the same credential for 24 h, the same key
 * with another request is a 409, and a key whose first request is still running is a 409 too. In
 * the service, the record committed with the write (libs/grpc idempotency.ts): a retry after an
 * outcome the gateway could not know (a 504, a lost connection, a gateway that died) reaches the
 * service, which answers with the first call's response instead of writing again.
 *
 * So only definite outcomes are stored here (a success or a 4xx, the service's answer); an unknown
 * one (any 5xx, a deadline, a cancellation, a lost connection) releases the key, and the retry asks
 * the service. A running request holds its key by a lease it renews while it runs: a request whose
 * gateway replica died is taken over once its lease (15 s) has passed, whatever its route's deadline.
 *
 * A completion that cannot be recorded (the gateway's database failed after the service did the
 * work) does not turn the write into a 5xx: the client gets the service's response, and recording
 * is retried in the background until it lands (docs/decisions.md: the residual window).
 */
import * as grpc from '@grpc/grpc-js';
import { isDatabaseUnavailable, type Pool } from '@workauto/db';
import type { Keyring } from '@workauto/crypto';
import { idempotencySealInfo, requestFingerprint } from '@workauto/grpc';
import type { Logger } from '@workauto/logger';
import { GatewayError, gatewayErrors } from './errors.js';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
const RETENTION = '24 hours';
/** How long a running request holds its key without renewing: a dead gateway's keys are free after it. */
const IDEMPOTENCY_LEASE_MS = 15_000;
/** How often a running request renews its lease. */
const RENEW_EVERY_MS = 5_000;

export interface StoredResponse {
  status: number;
  /** The JSON body, or null for an empty one. */
  body: unknown;
  headers: Record<string, string>;
}

export type Begin = { kind: 'first' } | { kind: 'replay'; response: StoredResponse };

export class IdempotencyStore {
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly keyring: Keyring,
    private readonly logger: Logger,
    /** How long a running request holds its key between renewals (tests shorten it). */
    private readonly lockMs = IDEMPOTENCY_LEASE_MS,
  ) {}

  /** Checks the header's value: printable ASCII, 1–255 characters. */
  static parseKey(value: string | undefined): string | undefined {
    if (value === undefined) return undefined;
    if (!KEY_PATTERN.test(value)) {
      throw gatewayErrors.badRequest([
        { field: 'Idempotency-Key', description: 'must be 1–255 printable ASCII characters (a UUID is a good choice)' },
      ]);
    }
    return value;
  }

  static fingerprint(route: string, request: unknown): string {
    return requestFingerprint(route, request);
  }

  /**
   * The keys that seal the response the service stores for this key and caller (Caller.idempotencySeal):
   * derived from the keyring, so any gateway replica derives the same ones and the service's database
   * alone reveals no stored secret.
   */
  sealFor(callerScope: string, key: string): string {
    return this.keyring.derive(idempotencySealInfo(callerScope, key));
  }

  /**
   * Keeps a running request's key held: renews its lease every few seconds until the returned
   * function is called. A renewal that fails (the database away) is tried at the next turn; the
   * service's record keeps a retry that takes the key over meanwhile from writing twice.
   */
  hold(scope: string, key: string): () => void {
    const timer = setInterval(
      () => {
        this.pool
          .query(
            `UPDATE idempotency_keys SET locked_until = now() + $3 * interval '1 millisecond'
            WHERE scope = $1 AND key = $2 AND response IS NULL`,
            [scope, key, this.lockMs],
          )
          .catch(() => undefined);
      },
      Math.min(RENEW_EVERY_MS, this.lockMs / 3),
    );
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Claims the key for this request, or returns the stored response; throws the 409s of docs/api.md §8, or a 503 while the store is unreachable. */
  async begin(scope: string, key: string, fingerprint: string): Promise<Begin> {
    try {
      return await this.claim(scope, key, fingerprint);
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      throw new GatewayError(
        grpc.status.UNAVAILABLE,
        'IDEMPOTENCY_STORE_UNAVAILABLE',
        'requests with an Idempotency-Key cannot be accepted right now (the gateway cannot reach its database); retry in a few seconds',
        undefined,
        { headers: { 'Retry-After': '2' } },
      );
    }
  }

  private async claim(scope: string, key: string, fingerprint: string): Promise<Begin> {
    for (let attempt = 0; attempt < 3; attempt++) {
      // New key, or one whose record expired or whose first request was abandoned: this request is first.
      const claimed = await this.pool.query(
        `INSERT INTO idempotency_keys (scope, key, fingerprint, locked_until)
         VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')
         ON CONFLICT (scope, key) DO UPDATE
           SET fingerprint = EXCLUDED.fingerprint, response = NULL, created_at = now(), locked_until = EXCLUDED.locked_until
           WHERE idempotency_keys.created_at < now() - interval '${RETENTION}'
              OR (idempotency_keys.response IS NULL AND idempotency_keys.locked_until < now())
         RETURNING 1`,
        [scope, key, fingerprint, this.lockMs],
      );
      if (claimed.rowCount) return { kind: 'first' };
      const { rows } = await this.pool.query<{ fingerprint: string; response: string | null }>(
        'SELECT fingerprint, response FROM idempotency_keys WHERE scope = $1 AND key = $2',
        [scope, key],
      );
      const row = rows[0];
      if (!row) continue; // swept between the two statements: claim again
      if (row.fingerprint !== fingerprint) {
        throw new GatewayError(
          grpc.status.ABORTED,
          'IDEMPOTENCY_KEY_REUSED',
          'this Idempotency-Key was already used with a different request; use a new key for a new request',
        );
      }
      if (row.response === null) {
        throw new GatewayError(
          grpc.status.ABORTED,
          'IDEMPOTENCY_KEY_IN_USE',
          'a request with this Idempotency-Key is still running; retry after it has finished',
          undefined,
          { headers: { 'Retry-After': '1' } },
        );
      }
      return {
        kind: 'replay',
        response: JSON.parse(this.keyring.decrypt(row.response, context(scope, key))) as StoredResponse,
      };
    }
    throw gatewayErrors.unavailable('the idempotency store is busy; retry the request');
  }

  async complete(scope: string, key: string, response: StoredResponse): Promise<void> {
    const sealed = this.keyring.encrypt(JSON.stringify(response), context(scope, key));
    await this.pool.query('UPDATE idempotency_keys SET response = $3 WHERE scope = $1 AND key = $2', [
      scope,
      key,
      sealed,
    ]);
  }

  /**
   * Records a definite outcome; when the database refuses, keeps trying in the background every
   * second for up to retryForMs (the response was already produced: it must not become a 5xx, and
   * a retry of the request must find it rather than run the work again).
   */
  async record(scope: string, key: string, response: StoredResponse, retryForMs = 10 * 60_000): Promise<void> {
    try {
      await this.complete(scope, key, response);
      return;
    } catch (err) {
      this.logger.warn({ err: String(err).slice(0, 200) }, 'idempotency record failed; retrying in the background');
    }
    const giveUpAt = Date.now() + retryForMs;
    const retry = () => {
      const timer = setTimeout(() => {
        this.complete(scope, key, response).catch((err: unknown) => {
          if (Date.now() < giveUpAt) return retry();
          this.logger.error(
            { err: String(err).slice(0, 200) },
            'idempotency record given up: a retry with this key after its lock may run the request again',
          );
        });
      }, 1_000);
      timer.unref();
    };
    retry();
  }

  /**
   * Frees the key when the outcome is unknown or provably nothing was done, so a retry runs the
   * request again. A failure here only delays that retry until the lock passes.
   */
  async release(scope: string, key: string): Promise<void> {
    try {
      await this.pool.query('DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND response IS NULL', [
        scope,
        key,
      ]);
    } catch (err) {
      this.logger.warn(
        { err: String(err).slice(0, 200) },
        'idempotency key release failed; a retry may take it over after its lock',
      );
    }
  }

  /** Deletes records older than 24 h every intervalMs. */
  startSweeping(intervalMs = 10 * 60_000): void {
    const sweep = () =>
      this.pool.query(`DELETE FROM idempotency_keys WHERE created_at < now() - interval '${RETENTION}'`).then(
        (r) => r.rowCount && this.logger.info({ deleted: r.rowCount }, 'expired idempotency keys deleted'),
        (err: unknown) =>
          this.logger.warn({ err: String(err) }, 'idempotency key sweep failed; next try in 10 minutes'),
      );
    void sweep();
    this.sweeper = setInterval(() => void sweep(), intervalMs);
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }
}

/** Bound into the ciphertext, so a stored response cannot be moved to another key or credential. */
function context(scope: string, key: string): string {
  return `idempotency:${scope}:${key}`;
}
