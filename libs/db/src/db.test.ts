import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  checkColumns,
  createPool,
  decodeCursor,
  preparedStatement,
  shapedStatement,
  encodeCursor,
  ensureDatabase,
  isConcurrencyFailure,
  listPage,
  newId,
  newestFirst,
  runMigrations,
  updateTenantRow,
  withTransaction,
  type KeysetCursor,
  type KeysetOrder,
  type Pool,
} from './index.js';

// libs/testing depends on this package, so the fresh database is made here directly.
async function freshDatabase(): Promise<string> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests through with-infra (make test)');
  return ensureDatabase(server, `t_db_${randomBytes(4).toString('hex')}`);
}

let databaseUrl: string;
let pool: Pool;
before(async () => {
  databaseUrl = await freshDatabase();
  pool = createPool(databaseUrl, { max: 6 });
  await pool.query(`CREATE TABLE items (id uuid PRIMARY KEY, tenant_id uuid NOT NULL, name text NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())`);
});
after(() => pool.end());

/** Every row of the tenant, page by page, through listPage and the opaque cursor. */
async function pageThrough(tenant: string, size: number, order: KeysetOrder): Promise<string[]> {
  const ids: string[] = [];
  let after: KeysetCursor | undefined;
  for (;;) {
    const page = await listPage<{ id: string }>(
      pool,
      { columns: 'id', from: 'items', where: 'tenant_id = $1', params: [tenant], order },
      { size, after },
    );
    assert.ok(page.rows.length <= size);
    assert.equal(page.keys.length, page.rows.length, 'one keyset per row');
    if (page.rows.length > 1) {
      // A page cut after its first row continues at its second (what toPage does to stay under the size limit).
      const cut = await listPage<{ id: string }>(
        pool,
        { columns: 'id', from: 'items', where: 'tenant_id = $1', params: [tenant], order },
        { size: 1, after: decodeCursor(encodeCursor(page.keys[0]!)) },
      );
      assert.equal(cut.rows[0]?.id, page.rows[1]!.id);
    }
    ids.push(...page.rows.map((r) => r.id));
    if (!page.next) return ids;
    after = decodeCursor(encodeCursor(page.next));
    assert.ok(after, 'the cursor survives its opaque form');
  }
}

describe('listPage (keyset pagination)', () => {
  it('returns every row exactly once, in order, at every page size, with equal and near-equal timestamps', async () => {
    const tenant = newId();
    const other = newId();
    // Equal timestamps: rows inserted by one transaction share its now().
    const batch = (n: number, t = tenant) =>
      withTransaction(pool, async (tx) => {
        for (let i = 0; i < n; i++)
          await tx.query('INSERT INTO items (id, tenant_id, name) VALUES ($1, $2, $3)', [newId(), t, `b${i}`]);
      });
    await Promise.all([batch(6), batch(5), batch(4), batch(3, other)]);
    // Near-equal timestamps: one microsecond apart, inside one millisecond, concurrently.
    const base = '2026-11-23 12:00:00.123';
    await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        pool.query(
          `INSERT INTO items (id, tenant_id, name, created_at, updated_at) VALUES ($1, $2, $3, $4::timestamptz, $4::timestamptz)`,
          [newId(), tenant, `u${i}`, `${base}${String(i % 4).padStart(3, '0')}+00`],
        ),
      ),
    );
    const all = async (dir: 'DESC' | 'ASC') =>
      (
        await pool.query<{ id: string }>(
          `SELECT id FROM items WHERE tenant_id = $1 ORDER BY created_at ${dir}, id ${dir}`,
          [tenant],
        )
      ).rows.map((r) => r.id);
    const newest = await all('DESC');
    const oldest = await all('ASC');
    assert.equal(newest.length, 27);
    for (let size = 1; size <= newest.length; size++) {
      assert.deepEqual(await pageThrough(tenant, size, newestFirst()), newest, `newest first, page size ${size}`);
      assert.deepEqual(
        await pageThrough(tenant, size, { ...newestFirst(), direction: 'oldest_first' }),
        oldest,
        `oldest first, page size ${size}`,
      );
    }
  });

  it('refuses cursors it did not write', () => {
    const id = newId();
    assert.deepEqual(decodeCursor(encodeCursor({ at: '2026-01-02T03:04:05.000001Z', id })), {
      at: '2026-01-02T03:04:05.000001Z',
      id,
    });
    for (const bad of [
      '',
      'x',
      Buffer.from('[1,2]').toString('base64url'),
      Buffer.from(JSON.stringify(['2026-01-02 03:04:05', id])).toString('base64url'),
      Buffer.from(JSON.stringify(['2026-01-02T03:04:05Z', 'nope'])).toString('base64url'),
    ]) {
      assert.equal(decodeCursor(bad), undefined, bad);
    }
  });
});

describe('withTransaction', () => {
  it('runs a deadlock victim again, so both sides of a real deadlock succeed', async () => {
    const tenant = newId();
    const [a, b] = [newId(), newId()];
    await pool.query(`INSERT INTO items (id, tenant_id, name) VALUES ($1, $3, 'a'), ($2, $3, 'b')`, [a, b, tenant]);
    let arrived = 0;
    let release!: () => void;
    const bothLocked = new Promise<void>((r) => (release = r));
    const runs = { ab: 0, ba: 0 };
    const lockBoth = (first: string, second: string, key: 'ab' | 'ba') =>
      withTransaction(pool, async (tx) => {
        runs[key]++;
        await tx.query(`UPDATE items SET name = name || $2 WHERE id = $1`, [first, key]);
        if (runs[key] === 1) {
          if (++arrived === 2) release();
          await bothLocked; // opposite lock order, both holding their first row: a deadlock
        }
        await tx.query(`UPDATE items SET name = name || $2 WHERE id = $1`, [second, key]);
      });
    await Promise.all([lockBoth(a, b, 'ab'), lockBoth(b, a, 'ba')]);
    // Once more for the victim; on a loaded machine its retry can take the row the winner was
    // woken for and deadlock again (PostgreSQL wakes the waiters, who race), which a retry resolves.
    assert.ok(runs.ab + runs.ba >= 3, `the victim ran again (${JSON.stringify(runs)})`);
    const { rows } = await pool.query<{ name: string }>('SELECT name FROM items WHERE tenant_id = $1 ORDER BY name', [
      tenant,
    ]);
    assert.equal(rows.length, 2);
    for (const r of rows) assert.equal(r.name.length, 5, `each row got both writes once: ${r.name}`);
  });

  it('runs a serialization failure (40001) again, and throws the last one after its attempts', async () => {
    const id = newId();
    await pool.query(`INSERT INTO items (id, tenant_id, name) VALUES ($1, $2, 'v')`, [id, newId()]);
    let runs = 0;
    // A REPEATABLE READ transaction that updates a row another one changed after its snapshot.
    const append = (interferingRuns: number) =>
      withTransaction(
        pool,
        async (tx) => {
          runs++;
          await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
          await tx.query('SELECT name FROM items WHERE id = $1', [id]);
          if (runs <= interferingRuns) await pool.query(`UPDATE items SET name = name || '+' WHERE id = $1`, [id]);
          await tx.query(`UPDATE items SET name = name || '!' WHERE id = $1`, [id]);
        },
        { attempts: 3 },
      );
    const name = async () =>
      (await pool.query<{ name: string }>('SELECT name FROM items WHERE id = $1', [id])).rows[0]!.name;
    await append(1);
    assert.equal(runs, 2);
    assert.equal(await name(), 'v+!');
    runs = 0;
    const err = await append(99).catch((e: unknown) => e);
    assert.equal((err as { code?: string }).code, '40001');
    assert.equal(isConcurrencyFailure(err), true);
    assert.equal(runs, 3);
    assert.equal(await name(), 'v+!+++', 'each failed run rolled back');
    let once = 0;
    await assert.rejects(
      withTransaction(pool, async () => {
        once++;
        throw Object.assign(new Error('dup'), { code: '23505' });
      }),
      /dup/,
    );
    assert.equal(once, 1, 'other failures are not retried');
  });

  it('rolls back instead of committing once the signal aborted (a cancelled call writes nothing)', async () => {
    const tenant = newId();
    const call = new AbortController();
    const deadline = new Error('deadline exceeded');
    const err = await withTransaction(
      pool,
      async (tx) => {
        await tx.query(`INSERT INTO items (id, tenant_id, name) VALUES ($1, $2, 'x')`, [newId(), tenant]);
        call.abort(deadline);
        return 'done';
      },
      { signal: call.signal },
    ).catch((e: unknown) => e);
    assert.equal(err, deadline, "the signal's reason is thrown");
    assert.equal((await pool.query('SELECT 1 FROM items WHERE tenant_id = $1', [tenant])).rowCount, 0);
    let ran = false;
    await assert.rejects(
      withTransaction(
        pool,
        async () => {
          ran = true;
        },
        { signal: call.signal },
      ),
      /deadline exceeded/,
    );
    assert.equal(ran, false, 'an already cancelled call does not start its transaction');
    assert.equal(await withTransaction(pool, async () => 'ok', { signal: new AbortController().signal }), 'ok');
  });
});

describe('createPool', () => {
  it('sets a statement_timeout, so a stuck statement fails (57014) instead of running past the caller', async () => {
    const short = createPool(process.env.TEST_DATABASE_URL!, { max: 1, statementTimeoutMs: 200 });
    try {
      await assert.rejects(short.query('SELECT pg_sleep(2)'), (e: { code?: string }) => e.code === '57014');
      const { rows } = await short.query<{ statement_timeout: string }>('SHOW statement_timeout');
      assert.equal(rows[0]!.statement_timeout, '200ms');
    } finally {
      await short.end();
    }
    assert.equal(
      (await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]!.statement_timeout,
      '3s',
      'the default',
    );
  });
});

describe('DATABASE_POOL_MAX', () => {
  const withPoolMax = async <T>(value: string | undefined, fn: () => Promise<T>): Promise<T> => {
    const saved = process.env.DATABASE_POOL_MAX;
    if (value === undefined) delete process.env.DATABASE_POOL_MAX;
    else process.env.DATABASE_POOL_MAX = value;
    try {
      return await fn();
    } finally {
      if (saved === undefined) delete process.env.DATABASE_POOL_MAX;
      else process.env.DATABASE_POOL_MAX = saved;
    }
  };
  /** The most connections the pool had open at once while it ran 12 queries together (counted by the server). */
  const peakConnections = async (): Promise<number> => {
    const name = `pool-max-${randomBytes(4).toString('hex')}`;
    const sized = createPool(databaseUrl, { applicationName: name });
    try {
      const counts = await Promise.all(
        Array.from({ length: 12 }, () =>
          sized.query<{ n: number }>(
            'SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = $1)::int AS n, pg_sleep(0.2)',
            [name],
          ),
        ),
      );
      return Math.max(...counts.map((r) => r.rows[0]!.n));
    } finally {
      await sized.end();
    }
  };

  it('sizes every pool: 3 opens at most 3 connections, unset keeps 10', async () => {
    assert.equal(await withPoolMax('3', peakConnections), 3);
    assert.equal(await withPoolMax(undefined, peakConnections), 10);
  });

  it('refuses a value outside 1..1000, naming the variable, when the pool is made (at start-up)', async () => {
    for (const bad of ['0', '1001', '2.5', 'ten', '-1']) {
      await withPoolMax(bad, async () =>
        assert.throws(
          () => createPool(databaseUrl, { max: 1 }),
          new RegExp(
            `DATABASE_POOL_MAX: must be a whole number of connections from 1 to 1000; unset it for 10 \\(got "${bad}"\\)`,
          ),
        ),
      );
    }
  });
});

describe('preparedStatement', () => {
  it("is kept prepared on the connection under its name and answers with each call's values, in and out of transactions", async () => {
    const tenant = newId();
    const byName = preparedStatement<[string, string]>(
      'test_items_by_name',
      'SELECT id, name FROM items WHERE tenant_id = $1 AND name = $2',
    );
    for (const name of ['a', 'b'])
      await pool.query('INSERT INTO items (id, tenant_id, name) VALUES ($1, $2, $3)', [newId(), tenant, name]);
    // More calls than the pool has connections, so connections that already prepared it run it again.
    const names = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => (await pool.query(byName([tenant, i % 2 ? 'a' : 'b']))).rows[0]?.name),
    );
    assert.deepEqual(
      names,
      Array.from({ length: 20 }, (_, i) => (i % 2 ? 'a' : 'b')),
    );
    const { found, prepared } = await withTransaction(pool, async (tx) => ({
      found: (await tx.query(byName([tenant, 'a']))).rows.length,
      prepared: (
        await tx.query(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'test_items_by_name'`)
      ).rows[0].n,
    }));
    assert.equal(found, 1);
    assert.equal(prepared, 1, 'the connection keeps the statement prepared under its name');
  });

  it('refuses a second text under a name already taken (pg would fail it only on a connection that has the first)', () => {
    preparedStatement('test_one_name', 'SELECT 1');
    assert.doesNotThrow(() => preparedStatement('test_one_name', 'SELECT 1'));
    assert.throws(
      () => preparedStatement('test_one_name', 'SELECT 2'),
      /two prepared statements are named test_one_name/,
    );
  });
});

describe('shapedStatement', () => {
  it('prepares each shape under a name of its own, with the values apart, and keeps at most 500 shapes', async () => {
    const tenant = newId();
    for (const name of ['a', 'b'])
      await pool.query('INSERT INTO items (id, tenant_id, name) VALUES ($1, $2, $3)', [newId(), tenant, name]);
    const byName = (name: string) =>
      shapedStatement('SELECT name FROM items WHERE tenant_id = $1 AND name = $2 ORDER BY name', [tenant, name]);
    const all = shapedStatement('SELECT name FROM items WHERE tenant_id = $1 ORDER BY name', [tenant]);
    assert.equal(byName('a').name, byName('b').name, 'one shape, one name, whatever the values');
    assert.notEqual(byName('a').name, all.name);
    const { a, both, prepared } = await withTransaction(pool, async (tx) => ({
      a: (await tx.query(byName('a'))).rows.map((r) => r.name),
      both: (await tx.query(all)).rows.map((r) => r.name),
      prepared: (
        await tx.query(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = ANY($1)`, [
          [byName('a').name, all.name],
        ])
      ).rows[0].n,
    }));
    assert.deepEqual([a, both, prepared], [['a'], ['a', 'b'], 2]);
    // Past the cap a new shape runs unnamed; the shapes named before keep their names.
    for (let i = 0; i < 500; i++) shapedStatement(`SELECT ${i} AS n`, []);
    assert.equal(shapedStatement('SELECT -1 AS n', []).name, undefined);
    assert.ok(byName('a').name, 'a shape named before the cap keeps its name');
  });
});

describe('updateTenantRow', () => {
  it("sets the defined fields and updated_at on the tenant's row only", async () => {
    const [tenant, other] = [newId(), newId()];
    const id = newId();
    await pool.query(
      `INSERT INTO items (id, tenant_id, name, updated_at) VALUES ($1, $2, 'old', now() - interval '1 hour')`,
      [id, tenant],
    );
    const columns = { name: true, created_at: true } as const;
    assert.equal(
      await updateTenantRow(pool, 'items', 'id, name', other, id, { name: 'stolen' }, columns),
      undefined,
      "another tenant's row is not found",
    );
    const dbNow = async () => (await pool.query<{ t: Date }>('SELECT now() AS t')).rows[0]!.t.getTime();
    const before = await dbNow();
    const row = await updateTenantRow<{ id: string; name: string; updated_at: Date }>(
      pool,
      'items',
      'id, name, updated_at',
      tenant,
      id,
      { name: 'new', created_at: undefined },
      columns,
    );
    assert.equal(row?.name, 'new');
    const after = await dbNow();
    const updatedAt = row?.updated_at.getTime() ?? 0;
    // On the database's clock, which set it: between a transaction before the update and one after.
    assert.ok(before <= updatedAt && updatedAt <= after, 'updated_at moved to the time of the update');
    const same = await updateTenantRow<{ name: string }>(pool, 'items', 'name', tenant, id, {}, columns);
    assert.equal(same?.name, 'new', 'an empty patch only touches updated_at');
  });

  it('refuses a key that is not one of its columns before any SQL is built', async () => {
    const [tenant, id] = [newId(), newId()];
    await pool.query(`INSERT INTO items (id, tenant_id, name) VALUES ($1, $2, 'kept')`, [id, tenant]);
    // What a request's keys spread into a patch would bring: one a column, one SQL.
    const fromRequest = JSON.parse('{"name": "new", "name = \'x\', tenant_id": "y"}') as object;
    await assert.rejects(
      updateTenantRow(pool, 'items', 'id', tenant, id, fromRequest, { name: true }),
      /items: no writable column name = 'x', tenant_id/,
    );
    assert.throws(() => checkColumns('items', { id: 'x', name: 'n' }, { name: true }), /items: no writable column id/);
    assert.doesNotThrow(() => checkColumns('items', { name: undefined }, { name: true }));
    const { rows } = await pool.query('SELECT name FROM items WHERE id = $1', [id]);
    assert.equal(rows[0].name, 'kept', 'nothing was written');
  });
});

describe('runMigrations', () => {
  it('applies each file once, across repeated and concurrent runs', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
    await writeFile(join(dir, '0001_create.sql'), 'CREATE TABLE m_things (id int PRIMARY KEY);');
    await writeFile(join(dir, '0002_seed.sql'), 'INSERT INTO m_things VALUES (1);');
    const runs = await Promise.all([
      runMigrations(pool, [dir]),
      runMigrations(pool, [dir]),
      runMigrations(pool, [dir]),
    ]);
    assert.deepEqual(runs.flat().sort(), ['0001_create', '0002_seed']);
    assert.deepEqual(await runMigrations(pool, [dir]), []);
    await writeFile(join(dir, '0003_more.sql'), 'INSERT INTO m_things VALUES (2);');
    assert.deepEqual(await runMigrations(pool, [dir]), ['0003_more']);
    assert.deepEqual((await pool.query('SELECT id FROM m_things ORDER BY id')).rows, [{ id: 1 }, { id: 2 }]);
  });

  it("is not cut short by the pool's statement_timeout, which its connections keep afterwards", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
    await writeFile(join(dir, '0001_slow.sql'), 'SELECT pg_sleep(0.4); CREATE TABLE m_slow (id int);');
    const short = createPool(databaseUrl, { max: 2, statementTimeoutMs: 150 });
    try {
      assert.deepEqual(await runMigrations(short, [dir]), ['0001_slow']);
      const clients = await Promise.all([short.connect(), short.connect()]);
      for (const c of clients) {
        assert.equal(
          (await c.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]!.statement_timeout,
          '150ms',
        );
        c.release();
      }
    } finally {
      await short.end();
    }
  });
});
