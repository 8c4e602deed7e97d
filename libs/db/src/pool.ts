import { hash } from 'node:crypto';
import pg from 'pg';
import { loadConfig, vars } from '@workauto/config';
import { retry, type Backoff, type Clock } from '@workauto/retry';
import { isConcurrencyFailure } from './errors.js';
import { keyedCall } from './idempotency.js';
import { readQueryConfigsWithoutCopy } from './query-config.js';
import { describeStatementsOnce } from './row-descriptions.js';
import { TenantShares, type TenantSlot } from './tenant-share.js';
import { timestamptzParser } from './timestamptz.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that runs a query: the pool, or a client inside a transaction. Repos take this. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// int8 (counts, cents) as a JS number: our int8 values stay far below 2^53. NUMERIC stays text,
// so money keeps its exact decimal value until a repo decides how to present it.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
// timestamptz read by position, pg's own parser kept for every other shape (timestamptz.ts).
pg.types.setTypeParser(
  pg.types.builtins.TIMESTAMPTZ,
  timestamptzParser(pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (text: string) => unknown),
);
// A named statement's result described once per connection, not at every execution (row-descriptions.ts).
describeStatementsOnce();
// A query's config read by its fields, not copied whole (query-config.ts).
readQueryConfigsWithoutCopy();

/** statement_timeout of every pooled connection unless DATABASE_STATEMENT_TIMEOUT_MS says otherwise. */
const DEFAULT_STATEMENT_TIMEOUT_MS = 3_000;

/**
 * The statement timeout of pooled connections: below the gateway's 5 s deadline, so a statement
 * stuck on a lock or a slow plan fails (and its transaction rolls back) while the caller still
 * waits for an answer, instead of committing after the client was told 504.
 */
function statementTimeoutMs(): number {
  return loadConfig({
    DATABASE_STATEMENT_TIMEOUT_MS: vars.integer(DEFAULT_STATEMENT_TIMEOUT_MS, {
      min: 1,
      what: 'a positive integer of milliseconds',
    }),
  }).DATABASE_STATEMENT_TIMEOUT_MS;
}

/** Connections per pool unless DATABASE_POOL_MAX says otherwise. */
const DEFAULT_POOL_MAX = 10;

/**
 * DATABASE_POOL_MAX: how many connections each process's pool opens at most. Replicas × this must
 * fit the server's max_connections (or the pooler's pool), so the operator sizes it.
 */
function poolMax(): number {
  return loadConfig({
    DATABASE_POOL_MAX: vars.integer(DEFAULT_POOL_MAX, {
      min: 1,
      max: 1000,
      what: 'a whole number of connections from 1 to 1000',
    }),
  }).DATABASE_POOL_MAX;
}

/** Every prepared statement's text by name: one name, one text (pg would fail the second on a connection that has the first). */
const preparedTexts = new Map<string, string>();

/**
 * A statement on a hot path, prepared once per pooled connection: PostgreSQL parses it once and,
 * after its first few calls, reuses a generic plan instead of planning each call (on a short
 * statement, planning can cost more than running it: docs/benchmarks.md). Use it for fixed texts run
 * many times per second, not for SQL built per call. `db.query(FIND_WORK([id]))`.
 */
export function preparedStatement<V extends unknown[] = unknown[]>(
  name: string,
  text: string,
): (values: V) => pg.QueryConfig {
  const known = preparedTexts.get(name);
  if (known !== undefined && known !== text)
    throw new Error(`two prepared statements are named ${name}; give each its own name`);
  preparedTexts.set(name, text);
  return (values) => ({ name, text, values });
}

/** The most statement shapes a process prepares (shapedStatement); past them a new shape runs unnamed. */
const MAX_SHAPES = 500;
const shapes = new Set<string>();

/**
 * A statement built per call from one of a bounded set of shapes (a list's filters and cursor, a
 * partial update's columns), prepared under a name derived from its text: each shape a connection
 * runs is parsed once and, after its first few calls, runs a generic plan, as preparedStatement's
 * fixed texts do (planning a list was 40–90 % of its time: docs/benchmarks.md, "The API mix").
 * Values never go into the text. Past MAX_SHAPES shapes in the process, a new one runs unnamed, so
 * what a connection keeps stays bounded whatever the callers build.
 */
export function shapedStatement(text: string, values: unknown[]): pg.QueryConfig {
  // One-shot hash (no Hash object per call: 1.3 -> 0.7 µs for a list's text, measured in a loop).
  const name = `shape_${hash('sha256', text, 'base64url').slice(0, 22)}`;
  if (!shapes.has(name)) {
    if (shapes.size >= MAX_SHAPES) return { text, values };
    shapes.add(name);
  }
  return { name, text, values };
}

type ConnectCallback = (
  err: Error | undefined,
  client: pg.PoolClient | undefined,
  done: (release?: unknown) => void,
) => void;

/** A pool whose checkouts in a tenant's scope (runForTenant) wait while that tenant holds its share. */
class TenantFairPool extends pg.Pool {
  constructor(
    config: pg.PoolConfig,
    private readonly shares: TenantShares,
  ) {
    super(config);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | void {
    let slot: ReturnType<TenantShares['acquire']>;
    try {
      slot = this.shares.acquire();
    } catch (err) {
      if (!callback) return Promise.reject(err);
      // Called back later, as every other failed checkout is.
      return void process.nextTick(() => callback(err as Error, undefined, () => undefined));
    }
    // pool.query's checkout (a callback) of a tenant under its share: no promise on the way (a
    // GetNote's checkout went through four; docs/benchmarks.md, "Where the time goes").
    if (callback && !(slot instanceof Promise)) {
      if (!slot) return super.connect(callback);
      const held = slot;
      return super.connect((err, client) => {
        if (err || !client) {
          held.release();
          return callback(err, undefined, () => undefined);
        }
        holdSlot(client, held);
        callback(undefined, client, (e) => client.release(e as Error | undefined));
      });
    }
    const checkout = (async () => {
      const held = await slot;
      if (!held) return super.connect();
      let client: pg.PoolClient;
      try {
        client = await super.connect();
      } catch (err) {
        held.release();
        throw err;
      }
      return holdSlot(client, held);
    })();
    if (!callback) return checkout;
    checkout.then(
      (client) => callback(undefined, client, (err) => client.release(err as Error | undefined)),
      (err: Error) => callback(err, undefined, () => undefined),
    );
  }
}

/** The checkout holds its tenant's slot until released: pg-pool gives each checkout its own release function, this one also frees the slot. */
function holdSlot(client: pg.PoolClient, slot: TenantSlot): pg.PoolClient {
  slot.checkedOut();
  const release = client.release.bind(client);
  client.release = (err?: Error | boolean) => {
    slot.release();
    return release(err);
  };
  return client;
}

/** Connections of a pool one tenant may hold at once (DATABASE_TENANT_CONNECTIONS; default half the pool). */
function tenantShare(max: number): number {
  const half = Math.max(1, Math.floor(max / 2));
  return Math.min(
    loadConfig({
      DATABASE_TENANT_CONNECTIONS: vars.integer(half, { min: 1, what: 'a positive whole number of connections' }),
    }).DATABASE_TENANT_CONNECTIONS,
    max,
  );
}

/** How long a checkout waits for a free connection, and for its tenant's share. */
const CONNECTION_TIMEOUT_MS = 5_000;

export function createPool(
  connectionString: string,
  opts: { max?: number; applicationName?: string; statementTimeoutMs?: number; tenantShare?: number } = {},
): pg.Pool {
  // Read even when opts.max is given, so a bad value stops the start at its first pool.
  const envMax = poolMax();
  const max = opts.max ?? envMax;
  const pool = new TenantFairPool(
    {
      connectionString,
      max,
      application_name: opts.applicationName,
      statement_timeout: opts.statementTimeoutMs ?? statementTimeoutMs(),
      // Fail a request fast rather than queueing forever when the database is gone.
      connectionTimeoutMillis: CONNECTION_TIMEOUT_MS,
      idleTimeoutMillis: 30_000,
    },
    new TenantShares(opts.tenantShare ?? tenantShare(max), CONNECTION_TIMEOUT_MS),
  );
  // An idle client's error (e.g. the server restarted) must not crash the process.
  pool.on('error', () => undefined);
  // Nor may a checked-out client's: one that breaks between queries (the relay's transaction
  // awaiting Kafka during a database outage) emits 'error' with no listener of its holder. The
  // holder sees the failure on its next query.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

export interface TransactionOptions {
  /**
   * The call's signal (`ctx.signal`): once it aborts (client cancelled, deadline passed) the
   * transaction is rolled back instead of committed, so a call the client saw fail wrote nothing;
   * the signal's reason is thrown (the gRPC kit's says DEADLINE_EXCEEDED or CANCELLED).
   */
  signal?: AbortSignal | undefined;
  /** Runs in all, counting the first (default 4). */
  attempts?: number;
  /** The clock its backoff waits on (default the system's; tests pass ManualClock). */
  clock?: Clock;
}

/**
 * Between runs: full jitter (a random part of 20, 40, 80 ms), so the transactions that collided do
 * not collide again in lockstep.
 */
const BACKOFF: Backoff = { firstMs: 20, jitter: 'full' };

/**
 * Runs fn in one transaction: COMMIT if it resolves, ROLLBACK if it throws. A transaction that
 * PostgreSQL aborts as a deadlock victim (40P01) or a serialization failure (40001) runs again
 * from the start after a jittered backoff, a few times; the last such failure is thrown (and
 * mapped to ABORTED, 409, by the gRPC kit). So fn must keep every effect inside the transaction.
 * Inside a call with an Idempotency-Key (runKeyed) the transaction also records the key, and stores
 * fn's result when it is the call's response (idempotency.ts).
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (tx: pg.PoolClient) => Promise<T>,
  opts: TransactionOptions = {},
): Promise<T> {
  // A call cancelled during a wait ends it, and the signal's reason is thrown.
  return retry(() => runOnce(pool, fn, opts.signal), {
    backoff: BACKOFF,
    retryable: isConcurrencyFailure,
    attempts: opts.attempts ?? 4,
    signal: opts.signal,
    clock: opts.clock,
  });
}

async function runOnce<T>(
  pool: pg.Pool,
  fn: (tx: pg.PoolClient) => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T> {
  signal?.throwIfAborted();
  // Part of a call with an Idempotency-Key: the key is recorded with the write (idempotency.ts).
  const keyed = keyedCall();
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    if (keyed) {
      keyed.remember(pool);
      await keyed.begin(client);
    }
    const result = await fn(client);
    if (keyed) await keyed.beforeCommit(client, result);
    // The last moment to honour a cancellation: after COMMIT the write is done.
    signal?.throwIfAborted();
    await client.query('COMMIT');
    keyed?.committed(pool);
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** The URL of database `name` on the same server as `serverUrl`. */
export function databaseUrlFor(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Creates database `name` on the server of `serverUrl` when it does not exist yet. */
export async function ensureDatabase(serverUrl: string, name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`invalid database name ${name}`);
  const client = new pg.Client({ connectionString: databaseUrlFor(serverUrl, 'postgres') });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      await client.query(`CREATE DATABASE ${name}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created concurrently by another process
      });
    }
  } finally {
    await client.end();
  }
  return databaseUrlFor(serverUrl, name);
}

/**
 * The columns a dynamic UPDATE or INSERT may write, named once in the repo as a record over its
 * patch or row type (`const PATCH: Columns<TaskPatch> = { title: true, … }`: the compiler checks
 * that it names every field and nothing else).
 */
export type Columns<T> = { readonly [K in keyof T]-?: true };

/**
 * Throws unless every key of `row` is one of `columns`. Column names are built into SQL text, so
 * they come from the repo's list, never from whatever keys an object carries at run time (a
 * request spread into a patch, `...req`, would otherwise put its keys into the statement).
 */
export function checkColumns(table: string, row: object, columns: Readonly<Record<string, true>>): void {
  const unknown = Object.keys(row).filter((k) => !Object.hasOwn(columns, k));
  if (unknown.length) throw new Error(`${table}: no writable column ${unknown.join(', ')}`);
}

/**
 * `UPDATE <table> SET <the patch's defined fields>, updated_at = now()` on one row of one tenant,
 * returning `returning`. Every key of the patch must be one of `columns` (checkColumns). `live`:
 * only a row not soft-deleted (`deleted_at IS NULL`) is updated; otherwise undefined is returned.
 */
export async function updateTenantRow<R extends pg.QueryResultRow>(
  db: Queryable,
  table: string,
  returning: string,
  tenantId: string,
  id: string,
  patch: object,
  columns: Readonly<Record<string, true>>,
  opts: { live?: boolean } = {},
): Promise<R | undefined> {
  checkColumns(table, patch, columns);
  const sets: string[] = [];
  const values: unknown[] = [tenantId, id];
  for (const [column, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    values.push(value);
    sets.push(`${column} = $${values.length}`);
  }
  const { rows } = await db.query<R>(
    shapedStatement(
      `UPDATE ${table} SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE tenant_id = $1 AND id = $2${opts.live ? ' AND deleted_at IS NULL' : ''} RETURNING ${returning}`,
      values,
    ),
  );
  return rows[0];
}
