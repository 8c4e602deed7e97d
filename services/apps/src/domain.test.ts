import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  InvalidClientError,
  InvalidGrantError,
  ServerError,
  TemporarilyUnavailableError,
  TooManyRequestsError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { validate } from '@workauto/grpc';
import { authHeaders, checkAuth } from './domain/auth.js';
import { classifyFailure, redact, type Observed } from './domain/failures.js';
import { accessTokenExpiresAt, callbackReason, isRefusal, refreshDue } from './domain/oauth.js';
import { collectListing, TOOL_LIMITS } from './domain/tools.js';

const observed = (o: Partial<Observed> = {}): Observed => ({
  statuses: [],
  fetchErrors: [],
  timedOut: false,
  timeoutMs: 10_000,
  ...o,
});
const named = (name: string, message: string) => Object.assign(new Error(message), { name });
const httpError = (code: number) =>
  Object.assign(new Error(`Error POSTing to endpoint: ${code}`), { name: 'StreamableHTTPError', code });

describe('probe failures', () => {
  it('map HTTP answers: 401/403 auth_failed, 5xx unreachable, 3xx and other 4xx protocol_error', () => {
    assert.equal(classifyFailure(httpError(401), observed(), []).status, 'auth_failed');
    assert.equal(classifyFailure(httpError(403), observed(), []).status, 'auth_failed');
    assert.equal(classifyFailure(httpError(503), observed(), []).status, 'unreachable');
    assert.match(classifyFailure(httpError(302), observed(), []).reason, /redirect .* never followed/);
    assert.equal(classifyFailure(httpError(400), observed(), []).status, 'protocol_error');
    // The SSE transport's POST errors carry the status only in their text: the wire decides.
    assert.equal(
      classifyFailure(
        new Error('Error POSTing to endpoint (HTTP 401)'),
        observed({
          statuses: [
            { method: 'GET', status: 200 },
            { method: 'POST', status: 401 },
          ],
        }),
        [],
      ).status,
      'auth_failed',
    );
    assert.equal(
      classifyFailure(new Error('x'), observed({ statuses: [{ method: 'GET', status: 405 }] }), []).status,
      'protocol_error',
      'a GET 405 is no error',
    );
  });

  it('map transport failures to unreachable, with the egress refusal named', () => {
    assert.deepEqual(classifyFailure(new Error('x'), observed({ timedOut: true }), []), {
      status: 'unreachable',
      reason: 'the server did not answer within 10 s',
    });
    const text = 'destination not allowed: the host internal.example resolves to a private address (RFC 1918), …';
    const refused = named('EgressRefusedError', text);
    const failure = classifyFailure(new TypeError('fetch failed'), observed({ fetchErrors: [refused] }), []);
    assert.deepEqual(
      failure,
      { status: 'unreachable', reason: text },
      "the egress policy's text, which names the rule",
    );
    assert.equal(
      classifyFailure(named('EgressConnectionError', 'could not reach http://x: ECONNREFUSED'), observed(), []).status,
      'unreachable',
    );
    assert.equal(
      classifyFailure(Object.assign(named('McpError', 'Request timed out'), { code: -32001 }), observed(), []).status,
      'unreachable',
    );
    assert.equal(
      classifyFailure(Object.assign(named('McpError', 'Method not found'), { code: -32601 }), observed(), []).status,
      'protocol_error',
    );
    assert.equal(classifyFailure(new SyntaxError('Unexpected token <'), observed(), []).status, 'protocol_error');
  });

  it('never keep a secret in a reason, and bound its length', () => {
    const reason = classifyFailure(new Error('server said: token sekrit-123456 is bad'), observed(), [
      'sekrit-123456',
    ]).reason;
    assert.equal(reason.includes('sekrit-123456'), false);
    assert.match(reason, /\[redacted\]/);
    assert.equal(redact('x'.repeat(2_000), []).length, 500);
  });
});

describe('tool listings', () => {
  const pages = (list: { tools: string[]; next?: string }[]) => {
    const seen: (string | undefined)[] = [];
    const page = async (cursor: string | undefined) => {
      seen.push(cursor);
      const p = list[cursor === undefined ? 0 : Number(cursor)]!;
      return {
        tools: p.tools.map((name) => ({ name, inputSchema: { type: 'object' } })),
        ...(p.next ? { nextCursor: p.next } : {}),
      };
    };
    return { page, seen };
  };

  it('follows nextCursor to the end: complete', async () => {
    const { page, seen } = pages([{ tools: ['a'], next: '1' }, { tools: ['b'], next: '2' }, { tools: ['c'] }]);
    const listing = await collectListing(page);
    assert.deepEqual(
      [listing.tools.map((t) => t.name), listing.complete, seen],
      [['a', 'b', 'c'], true, [undefined, '1', '2']],
    );
  });

  it('stops at a repeated cursor or after 64 pages: incomplete', async () => {
    const looping = pages([
      { tools: ['a'], next: '1' },
      { tools: ['b'], next: '1' },
    ]);
    const listing = await collectListing(looping.page);
    assert.deepEqual([listing.tools.map((t) => t.name), listing.complete, looping.seen.length], [['a', 'b'], false, 2]);
    let calls = 0;
    const endless = await collectListing(async () => ({
      tools: [{ name: `t${calls}`, inputSchema: {} }],
      nextCursor: `c${++calls}`,
    }));
    assert.deepEqual([calls, endless.complete], [TOOL_LIMITS.pages, false]);
  });

  it('drops tools it cannot keep (long names, huge schemas) and says the listing is incomplete', async () => {
    const listing = await collectListing(async () => ({
      tools: [
        { name: 'ok', inputSchema: { type: 'object' } },
        { name: 'x'.repeat(129), inputSchema: {} },
        { name: 'big', inputSchema: { d: 'x'.repeat(70_000) } },
      ],
    }));
    assert.deepEqual([listing.tools.map((t) => t.name), listing.complete], [['ok'], false]);
  });

  it('keeps a listing within its byte budget', async () => {
    const schema = { d: 'x'.repeat(15_000) };
    const listing = await collectListing(async () => ({
      tools: Array.from({ length: 40 }, (_, i) => ({ name: `t${i}`, inputSchema: schema })),
    }));
    assert.equal(listing.complete, false);
    assert.ok(listing.tools.length < 40 && listing.tools.length >= 30, `${listing.tools.length} tools kept`);
  });
});

describe('app auth', () => {
  it('becomes the headers the server expects', () => {
    assert.deepEqual(authHeaders('bearer', 's3cret-abc', null), { Authorization: 'Bearer s3cret-abc' });
    assert.deepEqual(authHeaders('header', 's3cret-abc', 'X-Api-Key'), { 'X-Api-Key': 's3cret-abc' });
    assert.deepEqual(authHeaders('none', null, null), {});
  });

  it('refuses headers the transport owns and secrets that would split a request', () => {
    const fields = (auth: Parameters<typeof checkAuth>[2], allowNone = true) => {
      const v = validate();
      checkAuth(v, 'auth', auth, { allowNone });
      try {
        v.done();
        return [];
      } catch (err) {
        return (err as { extra: { fieldViolations: { field: string }[] } }).extra.fieldViolations.map((f) => f.field);
      }
    };
    assert.deepEqual(fields({ type: 'header', secret: 'long-enough', header_name: 'Mcp-Session-Id' }), [
      'auth.header_name',
    ]);
    assert.deepEqual(fields({ type: 'header', secret: 'long-enough', header_name: 'Authorization' }), [
      'auth.header_name',
    ]);
    assert.deepEqual(fields({ type: 'bearer', secret: 'long\nenough' }), ['auth.secret']);
    assert.deepEqual(fields({ type: 'bearer', secret: 'short' }), ['auth.secret']);
    assert.deepEqual(fields({ type: 'none' }, false), ['auth.type']);
    assert.deepEqual(fields({ type: 'header', secret: 'long-enough', header_name: 'X-Api-Key' }), []);
  });

  it('oauth2: a client the tenant gives (client_id, its secret), scopes; nothing of the static types', () => {
    const fields = (auth: Parameters<typeof checkAuth>[2]) => {
      const v = validate();
      const input = checkAuth(v, 'auth', auth, { allowNone: false });
      try {
        v.done();
        return input;
      } catch (err) {
        return (err as { extra: { fieldViolations: { field: string }[] } }).extra.fieldViolations.map((f) => f.field);
      }
    };
    assert.deepEqual(fields({ type: 'oauth2' }), {
      type: 'oauth2',
      secret: null,
      headerName: null,
      clientId: null,
      scope: null,
    });
    assert.deepEqual(fields({ type: 'oauth2', client_id: 'c1', client_secret: 'client-secret', scope: 'read write' }), {
      type: 'oauth2',
      secret: 'client-secret',
      headerName: null,
      clientId: 'c1',
      scope: 'read write',
    });
    assert.deepEqual(fields({ type: 'oauth2', client_secret: 'client-secret' }), ['auth.client_secret']);
    assert.deepEqual(fields({ type: 'oauth2', secret: 'a-bearer-secret' }), ['auth.secret']);
    assert.deepEqual(fields({ type: 'oauth2', scope: 'read  "write"' }), ['auth.scope']);
    assert.deepEqual(fields({ type: 'oauth2', client_id: 'c\r\n1' }), ['auth.client_id']);
    assert.deepEqual(fields({ type: 'bearer', secret: 'long-enough', client_id: 'c1' }), ['auth.client_id']);
  });
});

describe('OAuth rules', () => {
  const now = new Date('2026-11-28T12:00:00Z');
  it('refreshes a token within its last minute, and never one without a lifetime', () => {
    const expires = accessTokenExpiresAt({ expires_in: 3600 }, now)!;
    assert.equal(expires.toISOString(), '2026-11-28T13:00:00.000Z');
    assert.equal(refreshDue(expires, new Date(expires.getTime() - 61_000)), false);
    assert.equal(refreshDue(expires, new Date(expires.getTime() - 60_000)), true);
    assert.equal(accessTokenExpiresAt({}, now), null);
    assert.equal(refreshDue(null, now), false);
  });

  it("tells an authorization server's judgement from an outage", () => {
    assert.equal(isRefusal(new InvalidGrantError('revoked')), true);
    assert.equal(isRefusal(new InvalidClientError('unknown client')), true);
    for (const outage of [
      new ServerError('HTTP 502: bad gateway'),
      new TemporarilyUnavailableError('busy'),
      new TooManyRequestsError('slow down'),
      new TypeError('fetch failed'),
    ])
      assert.equal(isRefusal(outage), false, outage.message);
  });

  it('sends back OAuth error codes as they are, anything else as the fallback', () => {
    assert.equal(callbackReason('access_denied', 'authorization_failed'), 'access_denied');
    assert.equal(callbackReason('<script>', 'authorization_failed'), 'authorization_failed');
    assert.equal(callbackReason(undefined, 'token_exchange_failed'), 'token_exchange_failed');
  });
});
