/**
 * The gateway over real HTTP in front of the real identity service (real gRPC, real PostgreSQL
 * from TEST_DATABASE_URL). Run through deploy/embedded's with-infra wrapper.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { ScalarType } from '@bufbuild/protobuf';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createIdentityService } from '@workauto/identity';
import { createLogger, setLogTarget } from '@workauto/logger';
import * as grpc from '@grpc/grpc-js';
import { errors, generateCallerKeys, toServiceError } from '@workauto/grpc';
import type { HttpBody } from '@workauto/protos/google/api/httpbody.js';
import {
  CalendarServiceService,
  type CalendarFeedToken,
  type CreateCalendarFeedTokenRequest,
  type StreamCalendarFeedRequest,
} from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { captureLogs, eventually, testCallerKeys, testDatabase } from '@workauto/testing';
import { createGateway, type Gateway, type GatewayOptions } from './index.js';
import { fieldByName } from '@workauto/protos';
import type { Route } from './routes.js';

// Every log line of the run (gateway and identity) is captured to check that no secret reaches it,
// and kept out of the test runner's output.
const logs = captureLogs();
setLogTarget(new Writable({ write: (_chunk, _enc, done) => done() }));

const ADMIN_TOKEN = `wkadmin_${randomBytes(24).toString('hex')}`;
const TWO_MIB = 2 * 1024 * 1024;

interface Res {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

interface Call {
  key?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** node:http, for what fetch refuses to send (a GET with a body). */
function rawRequest(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; headers: Headers; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
          resolve({ status: res.statusCode ?? 0, headers: h, text: Buffer.concat(chunks).toString('utf8') });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function client(base: string) {
  return async (method: string, path: string, opts: Call = {}): Promise<Res> => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key !== undefined) headers.authorization = `Bearer ${opts.key}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const {
      status,
      headers: resHeaders,
      text,
    } = body !== undefined && method === 'GET'
      ? await rawRequest(`${base}${path}`, method, headers, body)
      : await fetch(`${base}${path}`, { method, headers, body, redirect: 'manual' }).then(async (r) => ({
          status: r.status,
          headers: r.headers,
          text: await r.text(),
        }));
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status, headers: resHeaders, body: parsed, text };
  };
}

/** The error shape (docs/api.md §5), with the request id of the response header. */
function assertError(res: Res, status: number, reason?: string): void {
  assert.equal(res.status, status, `${res.status}: ${res.text.slice(0, 300)}`);
  const e = res.body?.error;
  assert.ok(e, `no error object: ${res.text.slice(0, 300)}`);
  assert.deepEqual(Object.keys(e).sort(), ['code', 'details', 'message', 'request_id', 'status']);
  assert.equal(e.code, status);
  assert.match(e.status, /^[A-Z_]+$/);
  assert.equal(typeof e.message, 'string');
  assert.doesNotMatch(e.message, /\n\s+at /, 'no stack trace');
  const info = e.details[0];
  assert.equal(info['@type'], 'type.googleapis.com/google.rpc.ErrorInfo');
  assert.equal(typeof info.reason, 'string');
  assert.equal(typeof info.domain, 'string');
  assert.equal(typeof info.metadata, 'object');
  for (const d of e.details.slice(1)) {
    assert.equal(d['@type'], 'type.googleapis.com/google.rpc.BadRequest');
    assert.ok(Array.isArray(d.field_violations));
  }
  assert.equal(e.request_id, res.headers.get('x-request-id'));
  if (status === 401) assert.equal(res.headers.get('www-authenticate'), 'Bearer');
  if (reason) assert.equal(info.reason, reason);
}

function violatedFields(res: Res): string[] {
  const bad = res.body?.error?.details?.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest'));
  return (bad?.field_violations ?? []).map((v: { field: string }) => v.field);
}

const isIdParam = (p: string) => p === 'id' || p.endsWith('_id');

/** A route's path with placeholder values (fresh UUIDs for ids), optionally one variable replaced. */
function pathOf(route: Route, replace: Record<string, string> = {}): string {
  return route.template.replace(/\{([a-z0-9_]+)\}/g, (_m, p: string) =>
    encodeURIComponent(replace[p] ?? (isIdParam(p) ? randomUUID() : 'x')),
  );
}

/** A body field of the route and a JSON value of the wrong type for it. */
function wrongTypedField(route: Route): { field: string; value: unknown } | undefined {
  const type = route.body === '*' ? route.requestType.desc : fieldByName(route.requestType.desc, route.body)?.message;
  if (!type) return undefined;
  for (const f of type.fields) {
    if (route.body === '*' && route.params.includes(f.name)) continue;
    if (f.message?.typeName === 'google.protobuf.Value') continue; // any JSON is right
    const value = f.fieldKind === 'scalar' && f.scalar === ScalarType.STRING ? 12345 : 'wrong';
    return { field: route.body === '*' ? f.name : `${route.body}.${f.name}`, value };
  }
  return undefined;
}

describe('gateway in front of identity', () => {
  let identity: { port: number; stop(): Promise<void> };
  let identityDatabaseUrl: string;
  let identityStopped = false;
  const gateways: Gateway[] = [];
  let gw: Gateway;
  let api: ReturnType<typeof client>;
  const secrets: string[] = [ADMIN_TOKEN];
  let a: { tenantId: string; ownerId: string; key: string };
  let b: { tenantId: string; ownerId: string; key: string };

  /**
   * Stops Date (node:test mock timers) until the test ends, before the test starts the gateway whose
   * limits it counts: the limits are per clock minute, and a test's requests that straddled two
   * minutes would meet two budgets (on a loaded machine a burst of a few seconds sometimes did).
   */
  function inOneMinute(t: TestContext) {
    t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  }

  async function startGateway(overrides: Partial<GatewayOptions> = {}) {
    const g = await createGateway({
      logger: createLogger('gateway'),
      downstreams: { identity: `127.0.0.1:${identity.port}` },
      databaseUrl: await testDatabase('gateway'),
      encryptionKeys: `k1:${randomBytes(32).toString('base64')}`,
      callerSigningKey: testCallerKeys.signingKey,
      ...overrides,
    });
    const port = await g.listen('127.0.0.1', 0);
    gateways.push(g);
    return { gateway: g, api: client(`http://127.0.0.1:${port}`), base: `http://127.0.0.1:${port}` };
  }

  async function bootstrap(name: string) {
    const res = await api('POST', '/api/v1/admin/tenants', {
      key: ADMIN_TOKEN,
      body: { name, owner: { name: `${name} Owner`, email: `owner-${randomBytes(3).toString('hex')}@example.com` } },
    });
    assert.equal(res.status, 201, res.text);
    secrets.push(res.body.api_key);
    return {
      tenantId: res.body.tenant.id as string,
      ownerId: res.body.member.id as string,
      key: res.body.api_key as string,
    };
  }

  /** A second member of tenant A through the invitation flow, with its API key. */
  async function invite(role: string) {
    const inv = await api('POST', '/api/v1/invitations', {
      key: a.key,
      body: { email: `m-${randomBytes(3).toString('hex')}@example.com`, role },
    });
    assert.equal(inv.status, 201, inv.text);
    secrets.push(inv.body.code);
    const claimed = await api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    assert.equal(claimed.status, 200, claimed.text);
    secrets.push(claimed.body.api_key);
    return { memberId: claimed.body.member.id as string, key: claimed.body.api_key as string };
  }

  before(async () => {
    identityDatabaseUrl = await testDatabase('gw');
    identity = await createIdentityService(
      {
        databaseUrl: identityDatabaseUrl,
        host: '127.0.0.1',
        port: 0,
        callerVerifyKeys: testCallerKeys.verifyKeys,
        platformAdminToken: ADMIN_TOKEN,
        encryptionKeys: `k1:${randomBytes(32).toString('base64')}`,
      },
      createLogger('identity'),
    );
    ({ gateway: gw, api } = await startGateway());
    a = await bootstrap('Alpha');
    b = await bootstrap('Beta');
  });

  after(async () => {
    for (const g of gateways) await g.close();
    if (!identityStopped) await identity?.stop();
    logs.stop();
  });

  it('bootstraps a tenant with the platform admin token: 201 {tenant, member, api_key}', async () => {
    const res = await api('POST', '/api/v1/admin/tenants', {
      key: ADMIN_TOKEN,
      body: { name: 'Gamma', owner: { name: 'G Owner', email: 'g@example.com' } },
    });
    assert.equal(res.status, 201, res.text);
    secrets.push(res.body.api_key);
    assert.deepEqual(Object.keys(res.body).sort(), ['api_key', 'member', 'tenant']);
    assert.deepEqual(Object.keys(res.body.tenant).sort(), ['created_at', 'id', 'name']);
    assert.match(res.body.tenant.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    assert.match(res.body.api_key, /^wk_[A-Za-z0-9]{32,}$/);
    const m = res.body.member;
    assert.deepEqual(
      {
        role: m.role,
        is_active: m.is_active,
        email: m.email,
        contact_id: m.contact_id,
        metadata: m.metadata,
        tenant_id: m.tenant_id,
      },
      {
        role: 'owner',
        is_active: true,
        email: 'g@example.com',
        contact_id: null,
        metadata: {},
        tenant_id: res.body.tenant.id,
      },
    );
  });

  it('lists members in the envelope, pages with limit and cursor, and keeps tenants apart', async () => {
    const list = await api('GET', '/api/v1/members', { key: a.key });
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(Object.keys(list.body).sort(), ['data', 'has_more', 'next_cursor']);
    assert.deepEqual(
      list.body.data.map((m: { id: string }) => m.id),
      [a.ownerId],
    );
    assert.equal(list.body.has_more, false);
    assert.equal(list.body.next_cursor, null);

    const foreign = await api('GET', `/api/v1/members/${a.ownerId}`, { key: b.key });
    assertError(foreign, 404, 'MEMBER_NOT_FOUND');
    const bList = await api('GET', '/api/v1/members', { key: b.key });
    assert.deepEqual(
      bList.body.data.map((m: { id: string }) => m.id),
      [b.ownerId],
    );
    assertError(await api('PATCH', `/api/v1/members/${a.ownerId}`, { key: b.key, body: { name: 'x' } }), 404);
    assertError(await api('DELETE', `/api/v1/members/${a.ownerId}`, { key: b.key }), 404);
    assertError(await api('GET', `/api/v1/members/${a.ownerId}/access-policies`, { key: b.key }), 404);

    const second = await invite('member');
    const page1 = await api('GET', '/api/v1/members?limit=1', { key: a.key });
    assert.equal(page1.body.data.length, 1);
    assert.equal(page1.body.has_more, true);
    assert.equal(typeof page1.body.next_cursor, 'string');
    const page2 = await api('GET', `/api/v1/members?limit=1&cursor=${encodeURIComponent(page1.body.next_cursor)}`, {
      key: a.key,
    });
    assert.equal(page2.body.has_more, false);
    assert.deepEqual(
      [...page1.body.data, ...page2.body.data].map((m: { id: string }) => m.id).sort(),
      [a.ownerId, second.memberId].sort(),
    );
  });

  it("enforces each route's policy: domain levels, platform admin, tenant credentials", async () => {
    const member = await invite('member');
    assert.equal((await api('GET', '/api/v1/members', { key: member.key })).status, 200, 'member role reads members');
    const denied = await api('POST', '/api/v1/invitations', {
      key: member.key,
      body: { email: 'x@example.com', role: 'viewer' },
    });
    assertError(denied, 403, 'ACCESS_DENIED');
    assert.match(denied.body.error.message, /admin access to members/);
    assert.deepEqual(denied.body.error.details[0].metadata, {
      domain: 'members',
      required_level: 'admin',
      actual_level: 'read',
    });
    assertError(await api('GET', '/api/v1/audit-log', { key: member.key }), 403, 'ACCESS_DENIED');
    assertError(await api('GET', '/api/v1/members', { key: ADMIN_TOKEN }), 403, 'TENANT_CREDENTIAL_REQUIRED');
    assertError(
      await api('POST', '/api/v1/admin/tenants', {
        key: a.key,
        body: { name: 'x', owner: { name: 'o', email: 'o@example.com' } },
      }),
      403,
      'PLATFORM_ADMIN_REQUIRED',
    );
    // Routes with an empty domain need only a tenant credential: every member manages its own keys.
    assert.equal((await api('GET', '/api/v1/api-keys', { key: member.key })).status, 200);
  });

  it("changes a member's role, deactivates it, and its key stops working at once on this replica", async (t) => {
    const m = await invite('member');
    const other = await startGateway({ authCacheTtlMs: 2_000 }); // another replica with its own cache
    const patched = await api('PATCH', `/api/v1/members/${m.memberId}`, {
      key: a.key,
      body: { role: 'viewer', metadata: { team: 'sales', level: 2 } },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.role, 'viewer');
    assert.deepEqual(patched.body.metadata, { team: 'sales', level: 2 });
    assertError(await api('GET', '/api/v1/integration-keys', { key: m.key }), 403, 'ACCESS_DENIED');

    // The other replica's cache lifetime is measured on Date, which the test moves from here (every
    // wait below is on that clock: none on the wall clock).
    t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    assert.equal((await other.api('GET', '/api/v1/members', { key: m.key })).status, 200);
    const del = await api('DELETE', `/api/v1/members/${m.memberId}`, {
      key: a.key,
      headers: { 'user-agent': 'gateway-e2e/1.0' },
    });
    assert.equal(del.status, 200, del.text);
    assert.equal(del.body.is_active, false);
    assert.equal(del.body.role, 'viewer');
    assertError(await api('GET', '/api/v1/members', { key: m.key }), 401);
    const stillListed = await api('GET', `/api/v1/members/${m.memberId}`, { key: a.key });
    assert.equal(stillListed.body.is_active, false);

    // The documented bound: another replica may trust its cached answer for authCacheTtlMs (2 s), no longer.
    t.mock.timers.tick(1_900);
    assert.equal(
      (await other.api('GET', '/api/v1/members', { key: m.key })).status,
      200,
      "served from the other replica's cache",
    );
    t.mock.timers.tick(200);
    assertError(await other.api('GET', '/api/v1/members', { key: m.key }), 401);
    t.mock.timers.reset();

    // The deactivation reached the audit log with the actor and client the gateway passed on.
    const entry = await eventually('member.deactivated was audited', async () => {
      const log = await api('GET', '/api/v1/audit-log?action=member.deactivated', { key: a.key });
      assert.equal(log.status, 200, log.text);
      return log.body.data.find((e: { resource_id: string }) => e.resource_id === m.memberId);
    });
    assert.equal(entry.actor_type, 'api_key');
    assert.equal(entry.user_agent, 'gateway-e2e/1.0');
    assert.match(entry.ip_address, /127\.0\.0\.1/);
  });

  it('refuses to deactivate the last active owner with 409 FAILED_PRECONDITION', async () => {
    const res = await api('DELETE', `/api/v1/members/${a.ownerId}`, { key: a.key });
    assertError(res, 409, 'LAST_OWNER');
    assert.equal(res.body.error.status, 'FAILED_PRECONDITION');
  });

  it("passes on the service's HTTP hint: a revoked invitation is 410", async () => {
    const inv = await api('POST', '/api/v1/invitations', {
      key: a.key,
      body: { email: 'revoked@example.com', role: 'member' },
    });
    secrets.push(inv.body.code);
    assert.equal((await api('DELETE', `/api/v1/invitations/${inv.body.id}`, { key: a.key })).status, 200);
    const claim = await api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    assertError(claim, 410);
    assert.equal(claim.body.error.status, 'FAILED_PRECONDITION');
  });

  it('revokes an API key with immediate effect, and answers 204 and bare arrays where annotated', async () => {
    const created = await api('POST', '/api/v1/api-keys', { key: a.key, body: { name: 'ci' } });
    assert.equal(created.status, 201, created.text);
    secrets.push(created.body.api_key);
    assert.equal((await api('GET', '/api/v1/members', { key: created.body.api_key })).status, 200);
    assert.equal((await api('DELETE', `/api/v1/api-keys/${created.body.id}`, { key: a.key })).status, 200);
    assertError(await api('GET', '/api/v1/members', { key: created.body.api_key }), 401);

    const credential = `sk-${randomBytes(12).toString('hex')}`;
    secrets.push(credential);
    const put = await api('PUT', '/api/v1/integration-keys/openai', {
      key: a.key,
      body: { credential, label: 'prod' },
    });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.key_hint, credential.slice(-4));
    assert.equal(put.body.last_verified_at, null);
    const del = await api('DELETE', '/api/v1/integration-keys/openai', { key: a.key });
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    assertError(await api('GET', '/api/v1/integration-keys/openai', { key: a.key }), 404);

    const policies = await api('GET', `/api/v1/members/${a.ownerId}/access-policies`, { key: a.key });
    assert.equal(policies.status, 200, policies.text);
    assert.ok(Array.isArray(policies.body), 'response_body "data" is a bare array');
  });

  it('answers bad input to every route with a 4xx in the error shape of docs/api.md §5, never a 5xx', async () => {
    const wrong: string[] = [];
    const check = async (label: string, res: Promise<Res>, status: number | '4xx', field?: string) => {
      const r = await res;
      try {
        assertError(r, status === '4xx' ? (r.status >= 400 && r.status < 500 ? r.status : 400) : status);
        if (field)
          assert.ok(
            violatedFields(r).includes(field),
            `violations ${JSON.stringify(violatedFields(r))} do not name ${field}`,
          );
      } catch (err) {
        wrong.push(`${label}: ${(err as Error).message.split('\n')[0]}`);
      }
    };
    for (const route of gw.routes) {
      const label = (what: string) => `${route.method} ${route.template} ${what}`;
      const tenantKey = route.auth === 'api_key' || route.auth === 'api_key_or_token';
      const key = route.auth === 'platform_admin' ? ADMIN_TOKEN : tenantKey ? a.key : undefined;
      const path = pathOf(route);
      if (route.auth !== 'none') {
        await check(label('without credential'), api(route.method, path), 401);
        await check(
          label('with Basic'),
          api(route.method, path, { headers: { authorization: 'Basic dXNlcjpwYXNz' } }),
          401,
        );
        await check(
          label('with an unknown key'),
          api(route.method, path, { key: `wk_${randomBytes(20).toString('hex')}` }),
          401,
        );
        await check(
          label('with the wrong kind of credential'),
          api(route.method, path, { key: tenantKey ? ADMIN_TOKEN : b.key }),
          403,
        );
      }
      if (route.successStatus === 302) {
        // A browser round trip: parameters an OAuth provider adds are dropped, so the service answers
        // (this gateway has identity only: another service's callback says it is not configured).
        await check(
          label('with an extra query parameter'),
          api(route.method, `${path}?colour=red`, { key }),
          route.downstream === 'identity' ? '4xx' : 501,
        );
      } else {
        await check(
          label('with an unknown query parameter'),
          api(route.method, `${path}?colour=red`, { key }),
          400,
          'colour',
        );
      }
      for (const p of route.params.filter(isIdParam)) {
        await check(
          label(`with a non-UUID ${p}`),
          api(route.method, pathOf(route, { [p]: 'not-a-uuid' }), { key }),
          400,
          p,
        );
      }
      if (route.body) {
        await check(label('with malformed JSON'), api(route.method, path, { key, body: '{"name": ' }), 400);
        await check(label('with a JSON array'), api(route.method, path, { key, body: [1, 2] }), 400);
        await check(
          label('with text/plain'),
          api(route.method, path, { key, body: 'name=x', headers: { 'content-type': 'text/plain' } }),
          415,
        );
        await check(
          label('with 2 MiB'),
          api(route.method, path, { key, body: JSON.stringify({ name: 'x'.repeat(TWO_MIB) }) }),
          413,
        );
        const unknown = route.body === '*' ? 'nmae_typo' : `${route.body}.nmae_typo`;
        await check(
          label('with an unknown field'),
          api(route.method, path, { key, body: { nmae_typo: 'x' } }),
          400,
          unknown,
        );
        const typed = wrongTypedField(route);
        if (typed) {
          const body = { [typed.field.split('.').pop()!]: typed.value };
          await check(
            label(`with a wrong-typed ${typed.field}`),
            api(route.method, path, { key, body }),
            400,
            typed.field,
          );
        }
      } else {
        await check(
          label('with a body it does not take'),
          api(route.method, path, { key, body: { x: 1 } }),
          400,
          '(body)',
        );
      }
    }
    assert.deepEqual(wrong, []);
  });

  it('answers typed query errors, unknown routes, wrong methods and request ids in the error shape of docs/api.md §5', async () => {
    await Promise.all([
      api('GET', '/api/v1/members?limit=1.5', { key: a.key }).then((r) => assertError(r, 400)),
      api('GET', '/api/v1/members?limit=1&limit=2', { key: a.key }).then((r) => assertError(r, 400)),
      api('GET', '/api/v1/members?limit=0', { key: a.key }).then((r) => assertError(r, 400)),
      api('GET', '/api/v1/members?cursor=bogus', { key: a.key }).then((r) => assertError(r, 400)),
      api('PATCH', `/api/v1/members/${a.ownerId}`, { key: a.key, body: { role: 'emperor' } }).then((r) =>
        assertError(r, 400),
      ),
      api('PATCH', `/api/v1/members/${a.ownerId}`, { key: a.key, body: { id: b.ownerId, name: 'x' } }).then((r) =>
        assertError(r, 400),
      ),
      api('GET', '/api/v1/members/%E0%A4%A', { key: a.key }).then((r) => assertError(r, 400)),
    ]);
    assertError(await api('GET', '/api/v1/no-such-thing', { key: a.key }), 404, 'ROUTE_NOT_FOUND');
    assertError(await api('GET', '/elsewhere'), 404, 'ROUTE_NOT_FOUND');
    const notAllowed = await api('PUT', `/api/v1/members/${a.ownerId}`, { key: a.key, body: {} });
    assertError(notAllowed, 405, 'METHOD_NOT_ALLOWED');
    assert.deepEqual(notAllowed.headers.get('allow')?.split(', ').sort(), ['DELETE', 'GET', 'PATCH']);
    // The method first: a form or broken body on a path without that method is its 405, not a 415 or 400.
    for (const [body, type] of [
      ['name=x', 'application/x-www-form-urlencoded'],
      ['{"name": ', 'application/json'],
    ] as const)
      assertError(
        await api('PUT', `/api/v1/members/${a.ownerId}`, { key: a.key, body, headers: { 'content-type': type } }),
        405,
        'METHOD_NOT_ALLOWED',
      );
    // Invalid JSON says where it breaks.
    const broken = await api('PATCH', `/api/v1/members/${a.ownerId}`, {
      key: a.key,
      body: '{"name": "Ann",\n "role": admin}',
    });
    assertError(broken, 400);
    assert.equal(
      broken.body.error.message,
      "the request body is not valid JSON: unexpected token 'a' at line 2, column 10 (position 25); fix it there and send it again",
    );
    const cut = await api('PATCH', `/api/v1/members/${a.ownerId}`, { key: a.key, body: '{"name": "Ann"' });
    assert.match(
      cut.body.error.details[1].field_violations[0].description,
      /ends early at line 1, column 15 \(position 14\)/,
    );
    const mine = await api('GET', '/api/v1/members', { key: a.key, headers: { 'x-request-id': 'req-123.abc' } });
    assert.equal(mine.headers.get('x-request-id'), 'req-123.abc');
    const odd = await api('GET', '/api/v1/members', { key: a.key, headers: { 'x-request-id': 'x'.repeat(300) } });
    assert.match(odd.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    assert.match((await api('GET', '/healthz')).headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });

  it('rate-limits per credential with 429 RESOURCE_EXHAUSTED and Retry-After', async (t) => {
    inOneMinute(t);
    const limited = await startGateway({ rateLimitPerMinute: 3 });
    const remaining: string[] = [];
    const policies = new Set<string | null>();
    for (let i = 0; i < 3; i++) {
      const ok = await limited.api('GET', '/api/v1/members', { key: a.key });
      assert.equal(ok.status, 200);
      // The IETF RateLimit fields (draft 8): what is left for how many seconds, and the policy with the key's partition.
      const [, r, resetIn] = /^"3-in-1min"; r=(\d+); t=(\d+)$/.exec(ok.headers.get('ratelimit') ?? '') ?? [];
      assert.ok(r !== undefined && Number(resetIn) <= 60, `RateLimit: ${ok.headers.get('ratelimit')}`);
      remaining.push(r);
      policies.add(ok.headers.get('ratelimit-policy'));
    }
    assert.deepEqual(remaining, ['2', '1', '0']);
    assert.equal(policies.size, 1, 'one policy and partition key for one credential');
    const [policy] = policies;
    assert.match(policy ?? '', /^"3-in-1min"; q=3; w=60; pk=:[A-Za-z0-9+/]+=*:$/);
    const res = await limited.api('GET', '/api/v1/members', { key: a.key });
    assertError(res, 429, 'RATE_LIMITED');
    assert.equal(res.body.error.status, 'RESOURCE_EXHAUSTED');
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
    assert.match(res.headers.get('ratelimit') ?? '', /^"3-in-1min"; r=0; t=\d+$/);
    const other = await limited.api('GET', '/api/v1/members', { key: b.key });
    assert.equal(other.status, 200, 'another credential has its own budget');
    assert.match(other.headers.get('ratelimit') ?? '', /; r=2; /);
    assert.notEqual(other.headers.get('ratelimit-policy'), policy, 'and its own partition key');
    // Without a credential, the client address is the key.
    const anon = await Promise.all([1, 2, 3, 4].map(() => limited.api('GET', '/api/v1/members')));
    assert.deepEqual(anon.map((r) => r.status).sort(), [401, 401, 401, 429]);
  });

  it('limits failed authentications per client address, whatever token each one tries', async () => {
    const limited = await startGateway({ rateLimitPerMinute: 3 });
    const made = () => limited.api('GET', '/api/v1/members', { key: `wk_${randomBytes(20).toString('hex')}` });
    for (let i = 0; i < 3; i++) assertError(await made(), 401);
    const res = await made();
    assertError(res, 429, 'RATE_LIMITED');
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
  });

  it('keeps serving a key that authenticated from an address whose made-up tokens are refused', async () => {
    const limited = await startGateway({ rateLimitPerMinute: 3 });
    assert.equal((await limited.api('GET', '/api/v1/members', { key: a.key })).status, 200);
    const made = () => limited.api('GET', '/api/v1/members', { key: `wk_${randomBytes(20).toString('hex')}` });
    for (let i = 0; i < 3; i++) assertError(await made(), 401);
    assertError(await made(), 429, 'RATE_LIMITED');
    assert.equal(
      (await limited.api('GET', '/api/v1/members', { key: a.key })).status,
      200,
      'the real key is not locked out',
    );
  });

  it('serves an OpenAPI 3.1 document of every route that validates', async () => {
    const res = await api('GET', '/api/v1/openapi.json');
    assert.equal(res.status, 200);
    const doc = res.body;
    assert.equal(doc.openapi, '3.1.0');
    for (const route of gw.routes)
      assert.ok(
        doc.paths[route.template]?.[route.method.toLowerCase()],
        `${route.method} ${route.template} is missing`,
      );
    const result = await new Validator().validate(doc);
    assert.equal(result.valid, true, String(JSON.stringify(result.errors)).slice(0, 1000));
    assert.deepEqual(doc.paths['/api/v1/invitations/claim'].post.security, []);
    assert.deepEqual(doc.components.securitySchemes.bearer, {
      ...doc.components.securitySchemes.bearer,
      type: 'http',
      scheme: 'bearer',
    });
  });

  it("answers 500 (not the client's 401) when a service refuses the gateway's caller signing key", async () => {
    const untrusted = generateCallerKeys('not-in-the-services-set');
    secrets.push(JSON.parse(untrusted.signingKey).d, JSON.parse(testCallerKeys.signingKey).d);
    const misconfigured = await startGateway({ callerSigningKey: untrusted.signingKey });
    const res = await misconfigured.api('GET', '/api/v1/members', { key: a.key });
    assertError(res, 500, 'CALLER_IDENTITY_INVALID');
    assert.match(res.body.error.message, /CALLER_SIGNING_KEY.*CALLER_VERIFY_KEYS/);
    assert.equal(res.headers.get('www-authenticate'), null);
  });

  it('pipes a stream of google.api.HttpBody chunk by chunk: a JSON error before the first chunk, a cut transfer after it, a cancel when the client goes', async () => {
    const OK = randomUUID();
    const MISSING = randomUUID();
    const BROKEN = randomUUID();
    const ENDLESS = randomUUID();
    const chunks = ['BEGIN:VCALENDAR\r\n', 'BEGIN:VEVENT\r\nUID:1\r\nEND:VEVENT\r\n', 'END:VCALENDAR\r\n'];
    const cancelled = Promise.withResolvers<void>();
    const body = (text: string): HttpBody => ({
      content_type: 'text/calendar; charset=utf-8',
      data: Buffer.from(text),
      extensions: [],
    });
    // A calendar service whose feed answers as each test case needs.
    const calendar = new grpc.Server();
    calendar.addService(
      { StreamCalendarFeed: CalendarServiceService.streamCalendarFeed },
      {
        StreamCalendarFeed: (call: grpc.ServerWritableStream<StreamCalendarFeedRequest, HttpBody>) => {
          const { id } = call.request;
          if (id === OK) {
            for (const c of chunks) call.write(body(c));
            call.end();
          } else if (id === MISSING) {
            call.emit('error', toServiceError(errors.notFound('calendar', id), 'calendar.workauto'));
          } else if (id === BROKEN) {
            call.write(body(chunks[0]!));
            call.emit('error', toServiceError(new Error('the database went away mid-feed'), 'calendar.workauto'));
          } else {
            call.on('cancelled', () => cancelled.resolve());
            const pump = () => {
              while (call.write(body('X'.repeat(64 * 1024))));
              call.once('drain', pump);
            };
            pump();
          }
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      calendar.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    try {
      const { api: feeds, base } = await startGateway({
        downstreams: { identity: `127.0.0.1:${identity.port}`, calendar: `127.0.0.1:${port}` },
      });
      const ok = await feeds('GET', `/api/v1/calendars/${OK}/events.ics`, { key: a.key });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get('content-type'), 'text/calendar; charset=utf-8', "the first chunk's type");
      assert.equal(ok.text, chunks.join(''));

      assertError(
        await feeds('GET', `/api/v1/calendars/${MISSING}/events.ics`, { key: a.key }),
        404,
        'CALENDAR_NOT_FOUND',
      );
      assertError(await feeds('GET', `/api/v1/calendars/${OK}/events.ics`), 401);

      const cut = await fetch(`${base}/api/v1/calendars/${BROKEN}/events.ics`, {
        headers: { authorization: `Bearer ${a.key}` },
      });
      assert.equal(cut.status, 200, 'the status went out with the first chunk');
      await assert.rejects(cut.text(), 'the client sees the transfer cut short, not a complete short body');
      assert.match(logs.text(), /a streamed response failed after its first chunk/);

      // The client reads one chunk and goes away: the gateway cancels the call, which the service sees.
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest(
          `${base}/api/v1/calendars/${ENDLESS}/events.ics`,
          { headers: { authorization: `Bearer ${a.key}` } },
          (res) => {
            assert.equal(res.statusCode, 200);
            res.once('data', () => {
              req.destroy();
              resolve();
            });
          },
        );
        req.on('error', () => undefined);
        req.on('timeout', reject);
        req.end();
      });
      await cancelled.promise;
    } finally {
      calendar.forceShutdown();
    }
  });

  it("passes a feed request with a token and no credential to the service without a principal; neither is a 401; feed URLs start at PUBLIC_BASE_URL or the request's own origin", async (t) => {
    const ID = randomUUID();
    const TOKEN = `wkcal_${randomBytes(24).toString('hex')}`;
    secrets.push(TOKEN);
    /** What the calendar service received: the request's token and the tenant its caller identity signed. */
    const seen: { token: string | undefined; tenant: unknown }[] = [];
    /** The tokens the gateway asked the calendar about, to admit the request under their tenant. */
    const resolved: (string | undefined)[] = [];
    const principal = (md: grpc.Metadata) =>
      JSON.parse(Buffer.from(String(md.get('x-caller-token')[0]).split('.')[1]!, 'base64url').toString()) as Record<
        string,
        unknown
      >;
    const calendar = new grpc.Server();
    calendar.addService(
      {
        StreamCalendarFeed: CalendarServiceService.streamCalendarFeed,
        CreateCalendarFeedToken: CalendarServiceService.createCalendarFeedToken,
        ResolveCalendarFeedToken: CalendarServiceService.resolveCalendarFeedToken,
      },
      {
        // Whose token it is: tenant A's, for any token but "unknown" (the service's 404).
        ResolveCalendarFeedToken: (
          call: grpc.ServerUnaryCall<{ id: string; token?: string }, { tenant_id: string }>,
          done: grpc.sendUnaryData<{ tenant_id: string }>,
        ) => {
          resolved.push(call.request.token);
          if (call.request.token === 'unknown') done({ code: grpc.status.NOT_FOUND, details: 'no such token' });
          else done(null, { tenant_id: a.tenantId });
        },
        StreamCalendarFeed: (call: grpc.ServerWritableStream<StreamCalendarFeedRequest, HttpBody>) => {
          seen.push({ token: call.request.token, tenant: principal(call.metadata).tenant_id });
          call.write({ content_type: 'text/calendar', data: Buffer.from('BEGIN:VCALENDAR\r\n'), extensions: [] });
          call.end();
        },
        CreateCalendarFeedToken: (
          call: grpc.ServerUnaryCall<CreateCalendarFeedTokenRequest, CalendarFeedToken>,
          done: grpc.sendUnaryData<CalendarFeedToken>,
        ) =>
          done(null, {
            feed_url: `${call.request.public_base_url}/api/v1/calendars/${call.request.id}/events.ics?token=x`,
            created_at: new Date(),
          }),
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      calendar.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    const downstreams = { identity: `127.0.0.1:${identity.port}`, calendar: `127.0.0.1:${port}` };
    try {
      inOneMinute(t);
      const { api: feeds } = await startGateway({ downstreams, rateLimitPerMinute: 4 });
      const feed = `/api/v1/calendars/${ID}/events.ics`;
      const byToken = await feeds('GET', `${feed}?token=${TOKEN}`);
      assert.equal(byToken.status, 200, byToken.text);
      assert.deepEqual(seen.pop(), { token: TOKEN, tenant: undefined }, 'the service gets the token and no tenant');
      assert.deepEqual(
        resolved,
        [TOKEN],
        "the gateway asked whose token it is, to admit it under that tenant's limits",
      );

      const neither = await feeds('GET', feed);
      assertError(neither, 401, 'UNAUTHENTICATED');
      assert.match(neither.body.error.message, /API key .*or its feed URL's token parameter/);
      assertError(await feeds('GET', `${feed}?token=`), 401, 'UNAUTHENTICATED');
      assertError(await feeds('GET', `${feed}?token=${TOKEN}`, { key: 'not-a-key' }), 401);
      assert.equal(seen.length, 0, 'none of them reached the service');

      const byKey = await feeds('GET', feed, { key: a.key });
      assert.equal(byKey.status, 200, byKey.text);
      assert.deepEqual(seen.pop(), { token: undefined, tenant: a.tenantId }, 'an API key works as before');
      // Requests without a credential, tokens included, count against their address's limit (4 a minute here; 3 so far).
      assert.equal((await feeds('GET', `${feed}?token=other`)).status, 200);
      assertError(await feeds('GET', `${feed}?token=${TOKEN}`), 429, 'RATE_LIMITED');

      // feed_url's origin: the request's scheme and Host, X-Forwarded-* only from a trusted proxy, or PUBLIC_BASE_URL.
      const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'calendar.example.com' };
      const create = async (to: string, headers: Record<string, string> = {}) => {
        const res = await rawRequest(
          `${to}/api/v1/calendars/${ID}/feed-token`,
          'POST',
          {
            authorization: `Bearer ${a.key}`,
            ...headers,
          },
          '',
        );
        assert.equal(res.status, 201, res.text);
        return new URL(JSON.parse(res.text).feed_url as string).origin;
      };
      const direct = await startGateway({ downstreams });
      // A token the service does not know is its 404 before any stream starts.
      const streamed = seen.length;
      const unknown = await direct.api('GET', `${feed}?token=unknown`);
      assert.equal(unknown.status, 404, unknown.text);
      assert.equal(seen.length, streamed, 'the feed was never streamed');
      assert.equal(await create(direct.base), direct.base);
      assert.equal(await create(direct.base, { host: 'api.example.com:8443' }), 'http://api.example.com:8443');
      assert.equal(
        await create(direct.base, forwarded),
        direct.base,
        'forwarded headers of an untrusted peer are ignored',
      );
      const proxied = await startGateway({ downstreams, trustedProxies: ['127.0.0.1/32', '::1/128'] });
      assert.equal(await create(proxied.base, forwarded), 'https://calendar.example.com');
      const configured = await startGateway({ downstreams, publicBaseUrl: 'https://api.example.com' });
      assert.equal(await create(configured.base, forwarded), 'https://api.example.com');
      const sent = await configured.api(
        'POST',
        `/api/v1/calendars/${ID}/feed-token?public_base_url=https://evil.example`,
        {
          key: a.key,
        },
      );
      assertError(sent, 400, 'INVALID_ARGUMENT');
      assert.equal(sent.body.error.message, 'public_base_url: is set by the gateway; leave it out');
    } finally {
      calendar.forceShutdown();
    }
  });

  it('on close, lets a request in flight finish for longer than the downstream deadline (a pod stopping mid-call)', async () => {
    // A deadline no test waits for: the gateway ends connections a second after it, so a close that
    // ends at all within the wait below ended at the last answer, not at the deadline.
    const { gateway, api: stopping } = await startGateway({ deadlineMs: 120_000 });
    // identity's read blocks behind this lock for 3 s (then answers), longer than the 2 s grace the gateway once gave.
    const lock = new pg.Client({ connectionString: identityDatabaseUrl });
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE invitations IN ACCESS EXCLUSIVE MODE');
    const inFlight = stopping('POST', '/api/v1/invitations/claim', { body: { code: 'wkinv_unknown' } }).catch(
      (err: unknown) => err as Error,
    );
    await eventually("the call waits for identity's read behind the lock", async () => {
      const { rows } = await lock.query(
        `SELECT 1 FROM pg_locks WHERE relation = 'invitations'::regclass AND NOT granted`,
      );
      return rows.length > 0;
    });
    gateways.splice(gateways.indexOf(gateway), 1);
    let closed = false;
    const closing = gateway.close().then(() => (closed = true));
    await sleep(3_000);
    await lock.query('ROLLBACK');
    await lock.end();
    const res = await inFlight;
    await eventually('the gateway closed once the last answer went out, not at its deadline', () => closed);
    await closing;
    assert.ok(
      !(res instanceof Error),
      `the call in flight got its answer instead of a closed connection (${String(res)})`,
    );
    assert.ok(
      res.status >= 400 && res.status < 600 && res.body?.error,
      `an answer in the API's error shape: ${res.text}`,
    );
  });

  it("keeps a tenant to GATEWAY_TENANT_CONCURRENCY requests in flight: another tenant's calls are served while it waits on slow ones", async () => {
    // The calls to a service are capped per gateway replica (maxInFlight); without a cap per tenant,
    // one tenant's slow calls took every slot and the other tenants got 503 SERVICE_OVERLOADED.
    // (The share of a tenant in a Downstream's calls is lifted here: this is the gateway's cap per tenant.)
    const { api: capped } = await startGateway({
      tenantConcurrency: 4,
      downstreamOptions: { maxInFlight: 6, tenantMaxInFlight: 6 },
    });
    const lock = new pg.Client({ connectionString: identityDatabaseUrl });
    await lock.connect();
    await lock.query('BEGIN');
    // Tenant A's invitation lists wait behind this lock; authentication and members do not touch the table.
    await lock.query('LOCK TABLE invitations IN ACCESS EXCLUSIVE MODE');
    let slow: Promise<Res>[];
    try {
      slow = Array.from({ length: 8 }, () => capped('GET', '/api/v1/invitations', { key: a.key }));
      // Answered while the lock still holds the first four: queued behind them, they would wait for it.
      const refused = await Promise.all(slow.slice(4));
      for (const res of refused) {
        assertError(res, 429, 'TENANT_CONCURRENCY_LIMITED');
        assert.equal(res.headers.get('retry-after'), '1');
      }
      const other = await capped('GET', '/api/v1/members', { key: b.key });
      assert.equal(other.status, 200, `tenant B is served meanwhile: ${other.text.slice(0, 200)}`);
    } finally {
      await lock.query('ROLLBACK');
      await lock.end();
    }
    for (const res of await Promise.all(slow.slice(0, 4)))
      assert.notEqual(
        res.status,
        429,
        "A's first 4 ran (the lock ends them with 200, or 503 past identity's statement timeout)",
      );
    const after = await capped('GET', '/api/v1/invitations', { key: a.key });
    assert.equal(after.status, 200, 'and A is served again once its requests finished');
  });

  it("limits a tenant's requests per minute across all its credentials (RATE_LIMIT_PER_TENANT_PER_MINUTE)", async (t) => {
    inOneMinute(t);
    const { api: limited } = await startGateway({ rateLimitPerMinute: 5, tenantRateLimitPerMinute: 8 });
    const keys = [a.key];
    for (let i = 0; i < 2; i++) {
      const created = await api('POST', '/api/v1/api-keys', { key: a.key, body: { name: `spread ${i}` } });
      assert.equal(created.status, 201, created.text);
      secrets.push(created.body.api_key);
      keys.push(created.body.api_key);
    }
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) statuses.push((await limited('GET', '/api/v1/members', { key: keys[i % 3] })).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 429], 'each key stayed under its 5');
    const over = await limited('GET', '/api/v1/members', { key: keys[0] });
    assertError(over, 429, 'TENANT_RATE_LIMITED');
    assert.ok(Number(over.headers.get('retry-after')) >= 1);
    assert.equal(
      (await limited('GET', '/api/v1/members', { key: b.key })).status,
      200,
      'another tenant is not limited',
    );
  });

  it('answers 501 SERVICE_NOT_CONFIGURED, not a 503 to retry, when the gateway runs without a service', async () => {
    const bare = await startGateway({ downstreams: {} });
    const res = await bare.api('GET', '/api/v1/members', { key: a.key });
    assertError(res, 501, 'SERVICE_NOT_CONFIGURED');
    assert.match(res.body.error.message, /IDENTITY_ADDR/);
    assert.equal((await bare.api('GET', '/readyz')).status, 200, 'nothing configured, nothing to wait for');
    // With identity but without notes-tasks: the caller is authenticated, then told what is missing.
    const notes = await api('GET', '/api/v1/notes', { key: a.key });
    assertError(notes, 501, 'SERVICE_NOT_CONFIGURED');
    assert.match(notes.body.error.message, /NOTES_TASKS_ADDR/);
  });

  it('never stores an unknown outcome for an Idempotency-Key: after a 504 the retry runs again', async () => {
    // Two replicas on one database: the first times out on every call, the second does not.
    const databaseUrl = await testDatabase('gateway_shared');
    const impatient = await startGateway({ databaseUrl, deadlineMs: 1 });
    const patient = await startGateway({ databaseUrl });
    const call = { key: a.key, body: { name: 'retry me' }, headers: { 'idempotency-key': `k-${randomUUID()}` } };
    const first = await impatient.api('POST', '/api/v1/api-keys', call);
    assertError(first, 504, 'DEADLINE_EXCEEDED');
    const retry = await patient.api('POST', '/api/v1/api-keys', call);
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.headers.get('idempotent-replayed'), null, 'the retry did the work; it is no replay of the 504');
    secrets.push(retry.body.api_key);
    const again = await patient.api('POST', '/api/v1/api-keys', call);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.body.id, retry.body.id);
  });

  it('limits failed authentications per address even when each request forges another X-Forwarded-For', async (t) => {
    inOneMinute(t);
    const limited = await startGateway({ rateLimitPerMinute: 20 });
    assert.equal((await limited.api('GET', '/api/v1/members', { key: a.key })).status, 200);
    const statuses: number[] = [];
    for (let i = 0; i < 1_000; i++) {
      const res = await limited.api('GET', '/api/v1/members', {
        key: `wk_${randomBytes(20).toString('hex')}`,
        headers: { 'x-forwarded-for': `198.51.100.${i % 250}, 203.0.113.${i % 200}` },
      });
      statuses.push(res.status);
    }
    assert.equal(statuses.filter((s) => s === 401).length, 20);
    assert.equal(statuses.filter((s) => s === 429).length, 980);
    // The address is over its limit, but a key known to be valid is never refused for it.
    assert.equal((await limited.api('GET', '/api/v1/members', { key: a.key })).status, 200);
    assertError(
      await limited.api('GET', '/api/v1/members', { key: `wk_${randomBytes(20).toString('hex')}` }),
      429,
      'RATE_LIMITED',
    );
  });

  it('believes X-Forwarded-For only from a trusted proxy (TRUSTED_PROXIES)', async (t) => {
    inOneMinute(t);
    const behindProxy = await startGateway({ rateLimitPerMinute: 3, trustedProxies: ['127.0.0.1/32', '::1/128'] });
    const from = (client: string) =>
      behindProxy.api('GET', '/api/v1/members', {
        key: `wk_${randomBytes(20).toString('hex')}`,
        headers: { 'x-forwarded-for': client },
      });
    for (let i = 0; i < 3; i++) assertError(await from('198.51.100.7'), 401);
    assertError(await from('198.51.100.7'), 429, 'RATE_LIMITED');
    assertError(await from('198.51.100.8'), 401); // another client behind the proxy has its own budget
  });

  it("answers 503 naming identity once it stops, and stays live and ready (readiness is the gateway's own)", async () => {
    assert.deepEqual((await api('GET', '/healthz')).body, { status: 'ok' });
    const ready = await api('GET', '/readyz');
    assert.equal(ready.status, 200, ready.text);
    assert.deepEqual(ready.body, { status: 'ready', services_down: [] });
    await identity.stop();
    identityStopped = true;
    const down = await api('GET', '/api/v1/members', { key: `wk_${randomBytes(20).toString('hex')}` });
    assertError(down, 503, 'SERVICE_UNAVAILABLE');
    assert.equal(down.body.error.details[0].metadata.service, 'identity');
    assert.match(down.body.error.message, /identity.*retry/);
    const readyNow = await eventually(
      '/readyz lists identity as down',
      async () => {
        const res = await api('GET', '/readyz');
        return res.body.services_down.length > 0 && res;
      },
      20_000,
      100,
    );
    assert.equal(readyNow.status, 200);
    assert.deepEqual(readyNow.body.services_down, ['identity']);
    assert.equal((await api('GET', '/healthz')).status, 200, 'liveness does not depend on downstreams');
  });

  it('never writes a token, API key, invitation code or credential to the logs', () => {
    const text = logs.text();
    assert.ok(text.includes('"msg":"request"'), 'the access log was captured');
    assert.ok(text.includes('"service":"identity"'), "identity's logs were captured");
    for (const secret of secrets)
      assert.equal(text.includes(secret), false, `${secret.slice(0, 6)}… appears in the logs`);
  });
});
