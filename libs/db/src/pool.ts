import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that runs a query: the pool, or a client inside a transaction. Repos take this. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// int8 (counts, cents) as a JS number: our int8 values stay far below 2^53. NUMERIC stays text,
// so money keeps its exact decimal value until a repo decides how to present it.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export function createPool(connectionString: string, opts: { max?: number; applicationName?: string } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName,
    // Fail a request fast rather than queueing forever when the database is gone.
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  });
  // An idle client's error (e.g. the server restarted) must not crash the process.
  pool.on('error', () => undefined);
  return pool;
}

/** Runs fn in one transaction: COMMIT if it resolves, ROLLBACK if it throws. */
export async function withTransaction<T>(pool: pg.Pool, fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/**
 * withTransaction, run again (up to `attempts` in all) when PostgreSQL aborts it as a deadlock
 * victim (40P01) or a serialization failure (40001). Only for work whose every effect is inside
 * the transaction: fn runs again from the start.
 */
export async function withRetriedTransaction<T>(pool: pg.Pool, fn: (tx: pg.PoolClient) => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withTransaction(pool, fn);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (attempt >= attempts || (code !== '40P01' && code !== '40001')) throw err;
    }
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
 * `UPDATE <table> SET <the patch's defined fields>, updated_at = now()` on one row of one tenant,
 * returning `returning`. Column names come from the repo's typed patch, never from input.
 */
export async function updateTenantRow<R extends pg.QueryResultRow>(
  db: Queryable,
  table: string,
  returning: string,
  tenantId: string,
  id: string,
  patch: Record<string, unknown>,
): Promise<R | undefined> {
  const sets: string[] = [];
  const values: unknown[] = [tenantId, id];
  for (const [column, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    values.push(value);
    sets.push(`${column} = $${values.length}`);
  }
  const { rows } = await db.query<R>(
    `UPDATE ${table} SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE tenant_id = $1 AND id = $2 RETURNING ${returning}`,
    values,
  );
  return rows[0];
}
