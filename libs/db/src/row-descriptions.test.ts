import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type pg from 'pg';
import { createPool, ensureDatabase, type Pool } from './index.js';

/** The RowDescription messages PostgreSQL sends a client, counted off its connection. */
function countDescriptions(client: pg.PoolClient): { readonly n: number } {
  const counter = { n: 0 };
  (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('rowDescription', () => counter.n++);
  return counter;
}

describe('a named statement is described once per connection', () => {
  let pool: Pool;
  before(async () => {
    const server = process.env.TEST_DATABASE_URL;
    if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests through with-infra (make test)');
    pool = createPool(await ensureDatabase(server, `t_rowdesc_${randomBytes(4).toString('hex')}`), { max: 2 });
    await pool.query(
      `CREATE TABLE things (id int8 PRIMARY KEY, name text NOT NULL, at timestamptz NOT NULL, tags text[] NOT NULL)`,
    );
    await pool.query(
      `INSERT INTO things VALUES (1, 'one', '2026-11-30 10:00:00+00', '{a,b}'), (2, 'two', '2026-11-30 11:00:00+00', '{}')`,
    );
  });
  after(() => pool.end());

  const byId = (id: number) => ({
    name: 'rowdesc_thing_by_id',
    text: 'SELECT id, name, at, tags FROM things WHERE id = $1',
    values: [id],
  });

  it('asks for the description at the first execution only, and parses every later row by it', async () => {
    const client = await pool.connect();
    try {
      const descriptions = countDescriptions(client);
      const first = await client.query(byId(1));
      assert.equal(descriptions.n, 1);
      for (const id of [2, 1, 3]) {
        const r = await client.query(byId(id));
        assert.deepEqual(
          r.fields.map((f) => f.name),
          ['id', 'name', 'at', 'tags'],
        );
        if (id === 3) assert.deepEqual(r.rows, []);
        else {
          // Each column through its type's parser: int8 as a number, timestamptz as a Date, text[] as an array.
          const row = r.rows[0] as { id: number; name: string; at: Date; tags: string[] };
          assert.equal(row.id, id);
          assert.equal(row.name, id === 1 ? 'one' : 'two');
          assert.equal(row.at.toISOString(), id === 1 ? '2026-11-30T10:00:00.000Z' : '2026-11-30T11:00:00.000Z');
          assert.deepEqual(row.tags, id === 1 ? ['a', 'b'] : []);
        }
      }
      assert.equal(descriptions.n, 1, 'three more executions, no description sent again');
      // Each row its own object: a caller that changes one changes no later row.
      const kept = (await client.query(byId(1))).rows[0] as Record<string, unknown>;
      kept.name = 'changed';
      kept.added = true;
      assert.deepEqual(Object.keys((await client.query(byId(2))).rows[0] as object), ['id', 'name', 'at', 'tags']);
      assert.equal(((await client.query(byId(1))).rows[0] as { name: string }).name, 'one');
      assert.deepEqual(first.rows, [{ id: 1, name: 'one', at: new Date('2026-11-30T10:00:00Z'), tags: ['a', 'b'] }]);
      // Rows as arrays use the same description.
      const arrays = await client.query({ ...byId(2), rowMode: 'array' });
      assert.deepEqual(arrays.rows, [[2, 'two', new Date('2026-11-30T11:00:00Z'), []]]);
    } finally {
      client.release();
    }
  });

  it('describes again on another connection, and for unnamed statements every time', async () => {
    const a = await pool.connect();
    const b = await pool.connect();
    try {
      await a.query(byId(1));
      const onB = countDescriptions(b);
      await b.query(byId(1));
      await b.query(byId(2));
      assert.equal(onB.n, 1, 'the other connection described the statement once itself');
      await b.query('SELECT id FROM things WHERE id = $1', [1]);
      await b.query('SELECT id FROM things WHERE id = $1', [2]);
      assert.equal(onB.n, 3, 'an unnamed statement is described at each execution');
    } finally {
      a.release();
      b.release();
    }
  });

  it('runs a named statement without rows again and again', async () => {
    const insert = (id: number) => ({
      name: 'rowdesc_insert_thing',
      text: `INSERT INTO things VALUES ($1, 'n', now(), '{}')`,
      values: [id],
    });
    for (const id of [10, 11, 12]) assert.equal((await pool.query(insert(id))).rowCount, 1);
    const r = await pool.query<{ n: number }>('SELECT count(*)::int8 AS n FROM things WHERE id >= 10');
    assert.equal(r.rows[0]!.n, 3);
  });

  it('answers a value pg cannot send with an error, and the connection goes on', async () => {
    const client = await pool.connect();
    try {
      const statement = {
        name: 'rowdesc_thing_by_name',
        text: 'SELECT id FROM things WHERE name = $1',
      };
      assert.deepEqual((await client.query({ ...statement, values: ['one'] })).rows, [{ id: 1 }]);
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      await assert.rejects(client.query({ ...statement, values: [circular] }), /circular/i);
      assert.deepEqual((await client.query(byId(2))).rows.length, 1);
    } finally {
      client.release();
    }
  });

  it('fails a statement whose result a schema change altered, as PostgreSQL decides', async () => {
    const client = await pool.connect();
    try {
      const star = { name: 'rowdesc_star', text: 'SELECT * FROM things WHERE id = $1', values: [1] };
      assert.equal(Object.keys((await client.query(star)).rows[0] as object).length, 4);
      await pool.query('ALTER TABLE things ADD COLUMN extra text');
      // Never rows parsed by the old description: PostgreSQL refuses the statement.
      await assert.rejects(client.query(star), /cached plan must not change result type/);
    } finally {
      client.release();
    }
  });
});
