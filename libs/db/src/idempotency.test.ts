/**
 * A keyed call's record, committed with its write, against a real PostgreSQL: a repeat replays the
 * first response and writes nothing, a repeat that arrives while the first is still in its
 * transaction waits for it and then replays, a rolled back write leaves the key free.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { eventually } from '@workauto/retry/testing';
import {
  IDEMPOTENCY_MIGRATIONS,
  IdempotencyKeyInUseError,
  IdempotencyKeyReusedError,
  createPool,
  deleteExpiredIdempotencyRecords,
  ensureDatabase,
  runKeyed,
  runMigrations,
  withTransaction,
  type KeyedWrite,
  type Pool,
} from './index.js';

let pool: Pool;
before(async () => {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests through with-infra (make test)');
  pool = createPool(await ensureDatabase(server, `t_idem_${randomBytes(4).toString('hex')}`), { max: 6 });
  await runMigrations(pool, [IDEMPOTENCY_MIGRATIONS]);
  await pool.query('CREATE TABLE things (id uuid PRIMARY KEY, name text NOT NULL)');
});
after(() => pool.end());

interface Thing {
  id: string;
  name: string;
}

/** A write keyed as the gRPC kit keys one: a result with the response's fields is the response; stored as JSON here. */
function keyed(key: string, request: unknown, scope = 'tenant/api_key/k1'): KeyedWrite {
  return {
    scope,
    key,
    fingerprint: JSON.stringify(request),
    storedForm: (result) =>
      result && typeof result === 'object' && 'id' in result && 'name' in result ? JSON.stringify(result) : undefined,
    recorded: (result, response) => result === response,
  };
}

/** The usual handler: one transaction that inserts and returns the response (`inside` holds it open). */
const createThing = (name: string, inside?: () => Promise<void>) =>
  withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<Thing>('INSERT INTO things (id, name) VALUES ($1, $2) RETURNING id, name', [
      randomUUID(),
      name,
    ]);
    await inside?.();
    return { ...rows[0]! };
  });

/** Resolves once some statement of the database waits for a lock (the sentinel of a blocked INSERT). */
async function untilAStatementWaits(): Promise<void> {
  await eventually(
    'a statement waits for a lock',
    async () =>
      (
        await pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        )
      ).rows.length > 0,
  );
}

const count = async (name: string) =>
  Number((await pool.query('SELECT count(*) AS n FROM things WHERE name = $1', [name])).rows[0].n);

describe('runKeyed with withTransaction', () => {
  it('records the key and the response with the write; a repeat replays it and writes nothing', async () => {
    const key = randomUUID();
    const first = await runKeyed(keyed(key, { name: 'a' }), () => createThing('a'));
    assert.equal(first.replayed, false);
    const again = await runKeyed(keyed(key, { name: 'a' }), () => createThing('a'));
    assert.equal(again.replayed, true);
    assert.deepEqual(again.replayed && JSON.parse(again.stored), !first.replayed && first.response);
    assert.equal(await count('a'), 1);
  });

  it('refuses the key with another request', async () => {
    const key = randomUUID();
    await runKeyed(keyed(key, { name: 'b' }), () => createThing('b'));
    await assert.rejects(
      runKeyed(keyed(key, { name: 'other' }), () => createThing('other')),
      IdempotencyKeyReusedError,
    );
    assert.equal(await count('other'), 0);
  });

  it('keeps callers apart: the same key of another caller is its own', async () => {
    const key = randomUUID();
    await runKeyed(keyed(key, { name: 'c' }, 'tenant-1/api_key/k'), () => createThing('c'));
    const theirs = await runKeyed(keyed(key, { name: 'c' }, 'tenant-2/api_key/k'), () => createThing('c'));
    assert.equal(theirs.replayed, false);
    assert.equal(await count('c'), 2);
  });

  it('a repeat while the first is in its transaction waits for its commit, then replays it', async () => {
    const key = randomUUID();
    let release!: () => void;
    let reached!: () => void;
    const inFirst = new Promise<void>((r) => (reached = r));
    const held = new Promise<void>((r) => (release = r));
    const first = runKeyed(keyed(key, { name: 'd' }), () => createThing('d', () => (reached(), held)));
    await inFirst; // the first holds its uncommitted record
    let settled = false;
    const second = runKeyed(keyed(key, { name: 'd' }), () => createThing('d')).finally(() => (settled = true));
    await untilAStatementWaits();
    assert.equal(settled, false, 'the repeat waits for the first transaction');
    release();
    const [a, b] = await Promise.all([first, second]);
    assert.equal(a.replayed, false);
    assert.equal(b.replayed, true);
    assert.equal(await count('d'), 1);
  });

  it('a write that rolled back leaves the key free: the repeat runs', async () => {
    const key = randomUUID();
    await assert.rejects(
      runKeyed(keyed(key, { name: 'e' }), () =>
        withTransaction(pool, async (tx) => {
          await tx.query('INSERT INTO things (id, name) VALUES ($1, $2)', [randomUUID(), 'e']);
          throw new Error('the handler failed');
        }),
      ),
      /the handler failed/,
    );
    const again = await runKeyed(keyed(key, { name: 'e' }), () => createThing('e'));
    assert.equal(again.replayed, false);
    assert.equal(await count('e'), 1);
  });

  it('a response built after the last transaction is stored after it, and replayed', async () => {
    const key = randomUUID();
    const handler = async () => {
      const row = await createThing('f');
      return { ...row, name: `${row.name} (built after)` };
    };
    const first = await runKeyed(keyed(key, { name: 'f' }), handler);
    const again = await runKeyed(keyed(key, { name: 'f' }), handler);
    assert.deepEqual(again.replayed && JSON.parse(again.stored), !first.replayed && first.response);
    assert.equal(await count('f'), 1);
  });

  it('a committed record whose response never came is "in use", then "abandoned" once older than a minute', async () => {
    const key = randomUUID();
    const write = keyed(key, { name: 'g' });
    await pool.query('INSERT INTO idempotency_records (scope, key, fingerprint) VALUES ($1, $2, $3)', [
      write.scope,
      key,
      write.fingerprint,
    ]);
    const inUse = await runKeyed(write, () => createThing('g')).catch((e: unknown) => e);
    assert.ok(inUse instanceof IdempotencyKeyInUseError && !inUse.abandoned, String(inUse));
    await pool.query(`UPDATE idempotency_records SET created_at = now() - interval '2 minutes' WHERE key = $1`, [key]);
    const lost = await runKeyed(write, () => createThing('g')).catch((e: unknown) => e);
    assert.ok(lost instanceof IdempotencyKeyInUseError && lost.abandoned, String(lost));
    assert.equal(await count('g'), 0);
  });

  it('a record past 24 hours is taken over by a new request, and the sweep deletes expired ones', async () => {
    const key = randomUUID();
    await runKeyed(keyed(key, { name: 'h' }), () => createThing('h'));
    await pool.query(`UPDATE idempotency_records SET created_at = now() - interval '25 hours' WHERE key = $1`, [key]);
    const later = await runKeyed(keyed(key, { name: 'other h' }), () => createThing('other h'));
    assert.equal(later.replayed, false, 'an expired key is new again, whatever its request');
    const old = randomUUID();
    await runKeyed(keyed(old, { name: 'i' }), () => createThing('i'));
    await pool.query(`UPDATE idempotency_records SET created_at = now() - interval '25 hours' WHERE key = $1`, [old]);
    assert.ok((await deleteExpiredIdempotencyRecords(pool)) >= 1);
    const { rowCount } = await pool.query('SELECT 1 FROM idempotency_records WHERE key = $1', [old]);
    assert.equal(rowCount, 0);
  });

  it('transactions outside a keyed call record nothing', async () => {
    const before = Number((await pool.query('SELECT count(*) AS n FROM idempotency_records')).rows[0].n);
    await createThing('j');
    const after = Number((await pool.query('SELECT count(*) AS n FROM idempotency_records')).rows[0].n);
    assert.equal(after, before);
  });
});
