/** Idempotency-Key on writes (docs/api.md, Idempotency), end to end through the gateway with real services. */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { fails, ok, reasonOf, startTestStack, type TenantFixture, type TestStack } from './harness.js';

describe('Idempotency-Key', () => {
  let stack: TestStack;
  let acme: TenantFixture;

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 10_000 } });
    acme = await stack.createTenant('Acme');
  });
  after(() => stack?.stop());

  /** The header every keyed call sends (none without a key). */
  const keyed = (idempotencyKey: string | undefined) =>
    idempotencyKey ? { params: { header: { 'Idempotency-Key': idempotencyKey } } } : {};
  const createKey = (name: string, idempotencyKey?: string, key = acme.key) =>
    stack.client(key).POST('/api/v1/api-keys', { body: { name }, ...keyed(idempotencyKey) });
  const keysNamed = async (name: string) =>
    (await ok(stack.client(acme.key).GET('/api/v1/api-keys', { params: { query: { limit: 200 } } }))).data.filter(
      (k) => k.name === name,
    );

  it('replays the first response, one-time secret included, without doing the work again', async () => {
    const key = randomUUID();
    const first = await createKey('ci-bot', key);
    assert.equal(first.response.status, 201);
    assert.match(first.data!.api_key!, /^wk_/);
    assert.equal(first.response.headers.get('idempotent-replayed'), null);
    const again = await createKey('ci-bot', key);
    assert.equal(again.response.status, 201);
    assert.deepEqual(again.data, first.data);
    assert.equal(again.response.headers.get('idempotent-replayed'), 'true');
    assert.equal((await keysNamed('ci-bot')).length, 1);
  });

  it('does the work twice without a key', async () => {
    await ok(createKey('no-key'), 201);
    await ok(createKey('no-key'), 201);
    assert.equal((await keysNamed('no-key')).length, 2);
  });

  it('answers 409 IDEMPOTENCY_KEY_REUSED when the same key comes with another body', async () => {
    const key = randomUUID();
    await ok(createKey('first-body', key), 201);
    const other = await fails(createKey('second-body', key), 409, 'IDEMPOTENCY_KEY_REUSED');
    assert.equal(other.body.error.status, 'ABORTED');
    assert.equal((await keysNamed('second-body')).length, 0);
  });

  it('keeps keys of different credentials apart', async () => {
    const key = randomUUID();
    const mine = await ok(createKey('shared-key', key), 201);
    const second = await ok(createKey('helper', undefined), 201);
    const theirs = await createKey('shared-key', key, second.api_key!);
    assert.equal(theirs.response.status, 201);
    assert.notEqual(theirs.data!.id, mine.id);
    assert.equal(theirs.response.headers.get('idempotent-replayed'), null);
  });

  it('replays an error response too', async () => {
    const key = randomUUID();
    const missing = randomUUID();
    const create = () =>
      stack.client(acme.key).POST('/api/v1/api-keys', { body: { name: 'x', member_id: missing }, ...keyed(key) });
    const first = await create();
    assert.ok(first.response.status >= 400 && first.response.status < 500, `status ${first.response.status}`);
    const again = await create();
    assert.equal(again.response.status, first.response.status);
    assert.deepEqual(again.error, first.error);
    assert.equal(again.response.headers.get('idempotent-replayed'), 'true');
  });

  it('keeps nothing for a request its service refused as invalid: corrected, the same key does the work', async () => {
    const key = randomUUID();
    const refused = await fails(createKey('x'.repeat(101), key), 400, 'INVALID_ARGUMENT');
    assert.deepEqual(
      refused.body.error.details.find((d: { field_violations?: unknown }) => d.field_violations)?.field_violations,
      [{ field: 'name', description: 'must be at most 100 characters (after trimming)' }],
      "the field's rule, checked by the service: one violation, as the gateway would have named it",
    );
    const corrected = await createKey('corrected', key);
    assert.equal(corrected.response.status, 201, 'not 409 IDEMPOTENCY_KEY_REUSED: the 400 was not kept');
    assert.equal(corrected.response.headers.get('idempotent-replayed'), null);
    assert.equal((await keysNamed('corrected')).length, 1);
  });

  it('creates one resource when 10 requests with one key race', async () => {
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 10 }, () => createKey('racer', key)));
    const created = results.filter((r) => r.response.status === 201);
    const inUse = results.filter((r) => r.response.status === 409);
    assert.equal(created.length + inUse.length, 10, JSON.stringify(results.map((r) => r.response.status)));
    assert.ok(created.length >= 1);
    assert.equal(new Set(created.map((r) => r.data!.id)).size, 1);
    for (const r of inUse) assert.equal(reasonOf(r.error), 'IDEMPOTENCY_KEY_IN_USE');
    assert.equal((await keysNamed('racer')).length, 1);
  });

  it('refuses a key that is not 1–255 printable characters', async () => {
    const res = await fails(createKey('bad-key', 'x'.repeat(256)), 400);
    assert.equal(res.body.error.details[1].field_violations[0].field, 'Idempotency-Key');
    assert.equal((await keysNamed('bad-key')).length, 0);
  });

  it('PATCH and DELETE take a key too: a repeat gets the first response, replayed, and is not applied again', async () => {
    const api = stack.client(acme.key);
    const note = await ok(api.POST('/api/v1/notes', { body: { title: 'keyed edits' } }), 201);
    const byId = { path: { id: note.id } };
    const patchKey = randomUUID();
    const patch = () =>
      api.PATCH('/api/v1/notes/{id}', {
        params: { ...byId, header: { 'Idempotency-Key': patchKey } },
        body: { title: 'renamed once' },
      });
    const first = await ok(patch());
    const again = await patch();
    assert.equal(again.response.status, 200);
    assert.equal(again.response.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.data!.updated_at, first.updated_at, 'the note was not updated a second time');
    const deleteKey = randomUUID();
    const remove = () =>
      api.DELETE('/api/v1/notes/{id}', { params: { ...byId, header: { 'Idempotency-Key': deleteKey } } });
    await ok(remove(), 204);
    const deletedAgain = await remove();
    assert.equal(deletedAgain.response.status, 204, 'the first answer, not a 404');
    assert.equal(deletedAgain.response.headers.get('idempotent-replayed'), 'true');
  });

  it("answers a retry from the service's own record when the gateway's is gone (the gateway died before recording)", async () => {
    const key = randomUUID();
    const first = await ok(createKey('gateway-lost', key), 201);
    const gateway = new pg.Client({ connectionString: stack.databaseUrl('gateway') });
    await gateway.connect();
    try {
      await gateway.query('DELETE FROM idempotency_keys WHERE key = $1', [key]);
    } finally {
      await gateway.end();
    }
    const retry = await createKey('gateway-lost', key);
    assert.equal(retry.response.status, 201);
    assert.equal(retry.response.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(retry.data, first, 'the same key, its one-time secret included');
    assert.equal((await keysNamed('gateway-lost')).length, 1);
    const identity = new pg.Client({ connectionString: stack.databaseUrl('identity') });
    await identity.connect();
    try {
      const { rows } = await identity.query<{ response: string }>(
        'SELECT response FROM idempotency_records WHERE key = $1',
        [key],
      );
      assert.match(rows[0]!.response, /^wk1\./, 'the service keeps it sealed');
      assert.ok(!Buffer.from(rows[0]!.response).toString().includes(first.api_key!));
    } finally {
      await identity.end();
    }
  });

  it('stores responses encrypted, never the secret in clear', async () => {
    const key = randomUUID();
    const res = await ok(createKey('stored', key), 201);
    const db = new pg.Client({ connectionString: stack.databaseUrl('gateway') });
    await db.connect();
    try {
      const { rows } = await db.query<{ response: string }>('SELECT response FROM idempotency_keys WHERE key = $1', [
        key,
      ]);
      assert.equal(rows.length, 1);
      assert.match(rows[0]!.response, /^wk1\./);
      assert.ok(!rows[0]!.response.includes(res.api_key!));
      assert.ok(!rows[0]!.response.includes('stored'));
    } finally {
      await db.end();
    }
  });
});
