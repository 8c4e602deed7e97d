/**
 * The Idempotency-Key store against a real PostgreSQL whose database is taken away and given back:
 * a completion that cannot be recorded neither fails the request nor lets a retry redo the work.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Keyring } from '@workauto/crypto';
import { createPool, databaseUrlFor, runMigrations, type Pool } from '@workauto/db';
import { createLogger } from '@workauto/logger';
import { eventually, testDatabase } from '@workauto/testing';
import { fileURLToPath } from 'node:url';
import { IdempotencyStore } from './idempotency.js';

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

describe('idempotency store while its database is away', () => {
  let url: string;
  let pool: Pool;
  let admin: Pool;
  let store: IdempotencyStore;
  const name = () => new URL(url).pathname.slice(1);

  before(async () => {
    url = await testDatabase('idem');
    pool = createPool(url, { applicationName: 'idempotency-test' });
    await runMigrations(pool, [MIGRATIONS]);
    admin = createPool(databaseUrlFor(process.env.TEST_DATABASE_URL!, 'postgres'), {
      applicationName: 'idempotency-test-admin',
    });
    store = new IdempotencyStore(pool, Keyring.fromEnv(Keyring.generateSpec()), createLogger('gateway'), 30_000);
  });
  after(async () => {
    await admin.query(`ALTER DATABASE ${name()} ALLOW_CONNECTIONS true`).catch(() => {});
    await admin?.end();
    await pool?.end();
  });

  const takeAway = async () => {
    await admin.query(`ALTER DATABASE ${name()} ALLOW_CONNECTIONS false`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name()]);
  };

  it('records a completion that failed once the database is back, and a retry replays it instead of redoing the work', async () => {
    const fingerprint = IdempotencyStore.fingerprint('POST /api/v1/notes', { title: 'x' });
    assert.equal((await store.begin('scope', 'key-1', fingerprint)).kind, 'first');
    await takeAway();
    const created = { status: 201, body: { id: 'n1' }, headers: {} };
    await store.record('scope', 'key-1', created); // resolves: the write happened, the client gets its 201
    // Meanwhile a request with a key is a 503 with a retry hint, not a 500.
    await assert.rejects(
      store.begin('scope', 'key-2', fingerprint),
      (err: { code?: number; reason?: string }) => err.reason === 'IDEMPOTENCY_STORE_UNAVAILABLE',
    );
    await admin.query(`ALTER DATABASE ${name()} ALLOW_CONNECTIONS true`);
    const replay = await eventually(
      'the recorded response is replayed once the store is back',
      async () => {
        const answer = await store.begin('scope', 'key-1', fingerprint).catch(() => undefined);
        return answer?.kind === 'replay' && answer;
      },
      20_000,
      200,
    );
    assert.deepEqual(replay, { kind: 'replay', response: created });
  });

  it('frees a key whose outcome is unknown, so the retry runs', async () => {
    const fingerprint = IdempotencyStore.fingerprint('POST /api/v1/notes', { title: 'y' });
    assert.equal((await store.begin('scope', 'key-3', fingerprint)).kind, 'first');
    await store.release('scope', 'key-3');
    assert.equal((await store.begin('scope', 'key-3', fingerprint)).kind, 'first');
  });
});
