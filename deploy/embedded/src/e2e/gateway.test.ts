import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { captureLogs } from '@workauto/testing';
import { assertError, startTestStack, type TestStack, type TenantFixture } from './harness.js';

const logs = captureLogs();

describe('gateway end to end (platform foundation)', () => {
  let stack: TestStack;
  let a: TenantFixture;
  let b: TenantFixture;

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 400 } });
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
  });
  after(() => stack?.stop());

  it('answers empty ids in bodies and queries of every service with 2xx or 4xx, never a 5xx', async () => {
    const probes: [string, string, unknown?][] = [
      ['POST', '/api/v1/api-keys', { name: 'x', member_id: '' }],
      ['GET', '/api/v1/api-keys?member_id='],
      ['POST', '/api/v1/tasks', { title: 'x', parent_id: '', assignee_id: '' }],
      ['GET', '/api/v1/tasks?parent_id=&assignee_id='],
      ['POST', '/api/v1/deals', { title: 'x', pipeline_id: '', contact_id: '', amount: 1 }],
      ['GET', '/api/v1/deals?pipeline_id=&stage_id=&owner_id=&contact_id='],
      ['POST', '/api/v1/notes', { title: 'x', notebook_id: '' }],
      ['POST', '/api/v1/invitations', { email: 'empty@ids.test', name: 'x', role: 'member', contact_id: '' }],
      ['PATCH', `/api/v1/members/${a.ownerId}`, { contact_id: '' }],
      ['GET', '/api/v1/audit-log?cursor='],
    ];
    for (const [method, path, body] of probes) {
      const res = await stack.api(method, path, { key: a.key, ...(body ? { body } : {}) });
      assert.ok(res.status < 500, `${method} ${path} ${JSON.stringify(body ?? '')}: ${res.status} ${JSON.stringify(res.body)}`);
    }
  });

  it('lists the owner in the envelope, and keeps tenants apart', async () => {
    const list = await stack.api('GET', '/api/v1/members', { key: a.key });
    assert.equal(list.status, 200);
    assert.deepEqual(Object.keys(list.body).sort(), ['data', 'has_more', 'next_cursor']);
    assert.equal(list.body.has_more, false);
    assert.equal(list.body.next_cursor, null);
    const owner = list.body.data[0];
    assert.equal(owner.id, a.ownerId);
    assert.equal(owner.tenant_id, a.id);
    assert.equal(owner.role, 'owner');
    assert.equal(owner.is_active, true);
    assert.deepEqual(owner.metadata, {});
    assert.match(owner.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    const foreign = await stack.api('GET', `/api/v1/members/${a.ownerId}`, { key: b.key });
    assertError(foreign, 404);
    assert.equal(foreign.body.error.details[0].reason, 'MEMBER_NOT_FOUND');
    const bList = await stack.api('GET', '/api/v1/members', { key: b.key });
    assert.deepEqual(bList.body.data.map((m: { id: string }) => m.id), [b.ownerId]);
    const patchForeign = await stack.api('PATCH', `/api/v1/members/${a.ownerId}`, { key: b.key, body: { name: 'x' } });
    assertError(patchForeign, 404);
    const deleteForeign = await stack.api('DELETE', `/api/v1/members/${a.ownerId}`, { key: b.key });
    assertError(deleteForeign, 404);
  });

  it('deactivates a non-owner (whose key then gets 401) and refuses the last owner with 409', async () => {
    const inv = await stack.api('POST', '/api/v1/invitations', { key: a.key, body: { email: 'temp@alpha.test', role: 'member' } });
    const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    const del = await stack.api('DELETE', `/api/v1/members/${claimed.body.member.id}`, { key: a.key });
    assert.equal(del.status, 200);
    assert.equal(del.body.is_active, false);
    assertError(await stack.api('GET', '/api/v1/members', { key: claimed.body.api_key }), 401);
    const stillListed = await stack.api('GET', `/api/v1/members/${claimed.body.member.id}`, { key: a.key });
    assert.equal(stillListed.body.is_active, false);
    const last = await stack.api('DELETE', `/api/v1/members/${a.ownerId}`, { key: a.key });
    assertError(last, 409);
    assert.equal(last.body.error.details[0].reason, 'LAST_OWNER');
    assert.equal(last.body.error.status, 'FAILED_PRECONDITION');
  });

  it('answers bad input with a 4xx in the contract shape, never a 5xx', async () => {
    const id = a.ownerId;
    const twoMiB = JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) });
    const cases: [string, string, Parameters<TestStack['api']>[2], number][] = [
      ['GET', '/api/v1/members', {}, 401],
      ['GET', '/api/v1/members', { key: 'wk_not_a_real_key' }, 401],
      ['GET', '/api/v1/members', { headers: { authorization: 'Basic abc' } }, 401],
      ['GET', '/api/v1/members', { key: stack.adminToken }, 403],
      ['POST', '/api/v1/admin/tenants', { key: a.key, body: { name: 'x', owner: { name: 'o', email: 'o@x.test' } } }, 403],
      ['GET', '/api/v1/members/not-a-uuid', { key: a.key }, 400],
      ['GET', '/api/v1/members/00000000-0000-7000-8000-000000000000', { key: a.key }, 404],
      ['GET', '/api/v1/members?limit=0', { key: a.key }, 400],
      ['GET', '/api/v1/members?limit=abc', { key: a.key }, 400],
      ['GET', '/api/v1/members?cursor=bogus', { key: a.key }, 400],
      ['GET', '/api/v1/members?colour=red', { key: a.key }, 400],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: '{"name": ' }, 400],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: { name: 42 } }, 400],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: { nmae: 'typo' } }, 400],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: { role: 'emperor' } }, 400],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: { email: 'not-an-email' } }, 400],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: [1, 2] }, 400],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: 'name=x', headers: { 'content-type': 'text/plain' } }, 415],
      ['PATCH', `/api/v1/members/${id}`, { key: a.key, body: twoMiB }, 413],
      ['DELETE', '/api/v1/members/123', { key: a.key }, 400],
      ['POST', '/api/v1/admin/tenants', { key: stack.adminToken, body: { name: '' } }, 400],
      ['POST', '/api/v1/admin/tenants', { key: stack.adminToken, body: { name: 'x', owner: { name: 'o', email: 5 } } }, 400],
      ['POST', '/api/v1/admin/tenants', { body: { name: 'x' } }, 401],
      ['PUT', `/api/v1/members/${id}`, { key: a.key, body: {} }, 405],
      ['GET', '/api/v1/no-such-thing', { key: a.key }, 404],
    ];
    const wrong: string[] = [];
    for (const [method, path, opts, status] of cases) {
      const res = await stack.api(method, path, opts);
      if (res.status !== status || !res.body?.error) wrong.push(`${method} ${path.slice(0, 60)} → ${res.status} (want ${status}) ${JSON.stringify(res.body).slice(0, 160)}`);
      else assertError(res, status);
    }
    assert.deepEqual(wrong, []);
    const typo = await stack.api('PATCH', `/api/v1/members/${id}`, { key: a.key, body: { nmae: 'typo' } });
    const violations = typo.body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest')).field_violations;
    assert.equal(violations[0].field, 'nmae');
  });

  it('echoes a client request id and makes one otherwise', async () => {
    const mine = await stack.api('GET', '/api/v1/members', { key: a.key, headers: { 'x-request-id': 'req-123' } });
    assert.equal(mine.headers.get('x-request-id'), 'req-123');
    const made = await stack.api('GET', '/api/v1/members', { key: a.key });
    assert.match(made.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });

  it('serves an OpenAPI 3.1 document that lists every route and validates', async () => {
    const res = await stack.api('GET', '/api/v1/openapi.json');
    assert.equal(res.status, 200);
    const doc = res.body;
    assert.equal(doc.openapi, '3.1.0');
    for (const route of stack.gateway.routes) {
      assert.ok(doc.paths[route.template]?.[route.method.toLowerCase()], `${route.method} ${route.template} is missing`);
    }
    const result = await new Validator().validate(doc);
    assert.equal(result.valid, true, String(JSON.stringify(result.errors)).slice(0, 1000));
    assert.deepEqual(doc.paths['/api/v1/invitations/claim'].post.security, []);
  });

  it('is ready only while every downstream answers its health check', async () => {
    assert.equal((await stack.api('GET', '/healthz')).status, 200);
    const ready = await stack.api('GET', '/readyz');
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
  });

  it('rate-limits per credential with 429 and Retry-After', async () => {
    const c = await stack.createTenant('Limited');
    let limited: { status: number; body: any; headers: Headers } | undefined;
    for (let i = 0; i < 420 && !limited; i++) {
      const r = await stack.api('GET', '/api/v1/members', { key: c.key });
      if (r.status === 429) limited = r;
    }
    assert.ok(limited, 'no 429 after 420 requests with a limit of 400/min');
    assertError(limited, 429);
    assert.equal(limited.body.error.status, 'RESOURCE_EXHAUSTED');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    // Another credential is not affected.
    assert.equal((await stack.api('GET', '/api/v1/members', { key: b.key })).status, 200);
  });

  it('answers 503 when a downstream is down, and /readyz says so', async () => {
    await stack.stopService('identity');
    const res = await stack.api('GET', '/api/v1/members', { key: a.key });
    assertError(res, 503);
    const ready = await stack.api('GET', '/readyz');
    assert.equal(ready.status, 503);
    assert.deepEqual(ready.body.not_ready, ['identity']);
  });

  it('never writes an API key or the admin token to the logs', () => {
    const text = logs.text();
    assert.ok(text.includes('"request"'), 'the access log was captured');
    for (const secret of [a.key, b.key, stack.adminToken]) assert.equal(text.includes(secret), false);
  });
});
