/** Idempotency-Key on writes (docs/api.md, Idempotency), end to end through the gateway with real services. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { startTestStack, type TenantFixture, type TestStack } from './harness.js';

describe('Idempotency-Key', () => {
  let stack: TestStack;
  let acme: TenantFixture;

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 10_000 } });
    acme = await stack.createTenant('Acme');
  });
  after(() => stack?.stop());

  const createKey = (name: string, idempotencyKey?: string, key = acme.key) =>
    stack.api('POST', '/api/v1/api-keys', {
      key,
      body: { name },
      headers: idempotencyKey ? { 'idempotency-key': idempotencyKey } : {},
    });
  const keysNamed = async (name: string) => {
    const res = await stack.api('GET', '/api/v1/api-keys?limit=200', { key: acme.key });
    return (res.body.data as { name: string }[]).filter((k) => k.name === name);
  };

  it('replays the first response, one-time secret included, without doing the work again', async () => {
    const key = randomUUID();
    const first = await createKey('ci-bot', key);
    assert.equal(first.status, 201);
    assert.match(first.body.api_key, /^wk_/);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const again = await createKey('ci-bot', key);
    assert.equal(again.status, 201);
    assert.deepEqual(again.body, first.body);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal((await keysNamed('ci-bot')).length, 1);
  });

  it('does the work twice without a key', async () => {
    assert.equal((await createKey('no-key')).status, 201);
    assert.equal((await createKey('no-key')).status, 201);
    assert.equal((await keysNamed('no-key')).length, 2);
  });

  it('answers 409 IDEMPOTENCY_KEY_REUSED when the same key comes with another body', async () => {
    const key = randomUUID();
    assert.equal((await createKey('first-body', key)).status, 201);
    const other = await createKey('second-body', key);
    assert.equal(other.status, 409);
    assert.equal(other.body.error.status, 'ABORTED');
    assert.equal(other.body.error.details[0].reason, 'IDEMPOTENCY_KEY_REUSED');
    assert.equal((await keysNamed('second-body')).length, 0);
  });

  it('keeps keys of different credentials apart', async () => {
    const key = randomUUID();
    const mine = await createKey('shared-key', key);
    const second = await createKey('helper', undefined);
    const theirs = await createKey('shared-key', key, second.body.api_key);
    assert.equal(theirs.status, 201);
    assert.notEqual(theirs.body.id, mine.body.id);
    assert.equal(theirs.headers.get('idempotent-replayed'), null);
  });

  it('replays an error response too', async () => {
    const key = randomUUID();
    const missing = randomUUID();
    const first = await stack.api('POST', '/api/v1/api-keys', {
      key: acme.key,
      body: { name: 'x', member_id: missing },
      headers: { 'idempotency-key': key },
    });
    assert.ok(first.status >= 400 && first.status < 500, `status ${first.status}`);
    const again = await stack.api('POST', '/api/v1/api-keys', {
      key: acme.key,
      body: { name: 'x', member_id: missing },
      headers: { 'idempotency-key': key },
    });
    assert.equal(again.status, first.status);
    assert.deepEqual(again.body, first.body);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
  });

  it('creates one resource when 10 requests with one key race', async () => {
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 10 }, () => createKey('racer', key)));
    const created = results.filter((r) => r.status === 201);
    const inUse = results.filter((r) => r.status === 409);
    assert.equal(created.length + inUse.length, 10, JSON.stringify(results.map((r) => r.status)));
    assert.ok(created.length >= 1);
    assert.equal(new Set(created.map((r) => r.body.id)).size, 1);
    for (const r of inUse) assert.equal(r.body.error.details[0].reason, 'IDEMPOTENCY_KEY_IN_USE');
    assert.equal((await keysNamed('racer')).length, 1);
  });

  it('refuses a key that is not 1–255 printable characters', async () => {
    const res = await createKey('bad-key', 'x'.repeat(256));
    assert.equal(res.status, 400);
    assert.equal(res.body.error.details[1].field_violations[0].field, 'Idempotency-Key');
    assert.equal((await keysNamed('bad-key')).length, 0);
  });

  it('PATCH and DELETE take a key too: a repeat gets the first response, replayed, and is not applied again', async () => {
    const note = await stack.api('POST', '/api/v1/notes', { key: acme.key, body: { title: 'keyed edits' } });
    assert.equal(note.status, 201);
    const patchKey = randomUUID();
    const patch = () =>
      stack.api('PATCH', `/api/v1/notes/${note.body.id}`, {
        key: acme.key,
        body: { title: 'renamed once' },
        headers: { 'idempotency-key': patchKey },
      });
    const first = await patch();
    const again = await patch();
    assert.equal(first.status, 200);
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.body.updated_at, first.body.updated_at, 'the note was not updated a second time');
    const deleteKey = randomUUID();
    const remove = () =>
      stack.api('DELETE', `/api/v1/notes/${note.body.id}`, {
        key: acme.key,
        headers: { 'idempotency-key': deleteKey },
      });
    assert.equal((await remove()).status, 204);
    const deletedAgain = await remove();
    assert.equal(deletedAgain.status, 204, 'the first answer, not a 404');
    assert.equal(deletedAgain.headers.get('idempotent-replayed'), 'true');
  });

  it("answers a retry from the service's own record when the gateway's is gone (the gateway died before recording)", async () => {
    const key = randomUUID();
    const first = await createKey('gateway-lost', key);
    assert.equal(first.status, 201);
    const gateway = new pg.Client({ connectionString: stack.databaseUrl('gateway') });
    await gateway.connect();
    try {
      await gateway.query('DELETE FROM idempotency_keys WHERE key = $1', [key]);
    } finally {
      await gateway.end();
    }
    const retry = await createKey('gateway-lost', key);
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(retry.body, first.body, 'the same key, its one-time secret included');
    assert.equal((await keysNamed('gateway-lost')).length, 1);
    const identity = new pg.Client({ connectionString: stack.databaseUrl('identity') });
    await identity.connect();
    try {
      const { rows } = await identity.query<{ response: string }>(
        'SELECT response FROM idempotency_records WHERE key = $1',
        [key],
      );
      assert.match(rows[0]!.response, /^wk1\./, 'the service keeps it sealed');
      assert.ok(!Buffer.from(rows[0]!.response).toString().includes(first.body.api_key));
    } finally {
      await identity.end();
    }
  });

  it('stores responses encrypted, never the secret in clear', async () => {
    const key = randomUUID();
    const res = await createKey('stored', key);
    const db = new pg.Client({ connectionString: stack.databaseUrl('gateway') });
    await db.connect();
    try {
      const { rows } = await db.query<{ response: string }>('SELECT response FROM idempotency_keys WHERE key = $1', [
        key,
      ]);
      assert.equal(rows.length, 1);
      assert.match(rows[0]!.response, /^wk1\./);
      assert.ok(!rows[0]!.response.includes(res.body.api_key));
      assert.ok(!rows[0]!.response.includes('stored'));
    } finally {
      await db.end();
    }
  });
});
