import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { captureLogs, eventually } from '@workauto/testing';
import { startMcpServer, type McpTestServer } from '@workauto/apps/testing/mcp-servers';
import {
  assertError,
  assertRecord,
  startTestStack,
  violations,
  type TenantFixture,
  type TestStack,
} from './harness.js';

const SECRET = 'e2e-app-secret-5c1d93aa';
const NEW_SECRET = 'e2e-app-secret-rotated-71b0';

describe('apps through the gateway', () => {
  let stack: TestStack;
  let server: McpTestServer;
  let a: TenantFixture;
  let b: TenantFixture;
  const logs = captureLogs();
  before(async () => {
    server = await startMcpServer({
      transport: 'streamable',
      auth: { header: 'authorization', value: `Bearer ${SECRET}` },
      tools: [
        { name: 'search', description: 'Searches', inputSchema: { properties: { q: { type: 'string' } } } },
        { name: 'echo' },
      ],
    });
    stack = await startTestStack({ apps: { probeTimeoutMs: 2_000, toolCallTimeoutMs: 2_000 } });
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
  });
  after(async () => {
    logs.stop();
    await stack.stop();
    await server.close();
    for (const secret of [SECRET, NEW_SECRET])
      assert.equal(logs.text().includes(secret), false, `a log line holds ${secret}`);
  });

  const call = (method: string, path: string, key: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key, ...(body !== undefined ? { body } : {}) });
  const settled = async (key: string, slug: string) => {
    let app: any;
    await eventually(
      `app ${slug} probed`,
      async () => (app = (await call('GET', `/apps/${slug}`, key)).body).status !== 'pending',
    );
    return app;
  };

  it('serves every endpoint: create, get, list, patch, probe, call, rotate, delete', async () => {
    const created = await call('POST', '/apps', a.key, {
      slug: 'search',
      display_name: 'Search',
      mcp_server_url: server.url,
      auth: { type: 'bearer', secret: SECRET },
      metadata: { k: 1 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assertRecord(
      created.body,
      {
        id: 'uuid',
        tenant_id: 'uuid',
        slug: 'string',
        display_name: 'string',
        mcp_server_url: 'string',
        auth_type: 'string',
        status: 'string',
        consecutive_probe_failures: 'integer',
        discovered_tools: 'array',
        enabled_tools: 'array',
        metadata: 'object',
        created_at: 'date-time',
        updated_at: 'date-time',
      },
      'App',
    );
    assert.deepEqual(
      [
        created.body.status,
        created.body.auth_type,
        created.body.auth_hint,
        created.body.discovered_tools,
        created.body.enabled_tools,
      ],
      ['pending', 'bearer', SECRET.slice(-4), [], []],
    );
    assert.equal(JSON.stringify(created.body).includes(SECRET), false);

    const app = await settled(a.key, 'search');
    assert.equal(app.status, 'healthy', app.status_reason);
    assert.equal(app.status_reason, null);
    assertRecord(
      app.discovered_tools[0],
      {
        name: 'string',
        input_schema: 'object',
        first_seen_at: 'date-time',
        last_seen_at: 'date-time',
        stale: 'boolean',
      },
      'DiscoveredTool',
    );
    assert.deepEqual(
      app.discovered_tools.map((t: any) => t.name),
      ['echo', 'search'],
    );

    const list = await call('GET', '/apps', a.key);
    assert.deepEqual(
      [list.status, list.body.data.map((x: any) => x.slug), list.body.has_more, list.body.next_cursor],
      [200, ['search'], false, null],
    );

    assert.deepEqual(violations(await call('PATCH', '/apps/search', a.key, { enabled_tools: ['nope'] })), [
      'enabled_tools[0]',
    ]);
    const patched = await call('PATCH', '/apps/search', a.key, {
      enabled_tools: ['search'],
      description: 'Finds things',
    });
    assert.deepEqual(
      [patched.status, patched.body.enabled_tools, patched.body.description],
      [200, ['search'], 'Finds things'],
    );

    const result = await call('POST', '/apps/search/tools/search/call', a.key, { arguments: { q: 'hello' } });
    assert.equal(result.status, 200, JSON.stringify(result.body));
    assert.deepEqual(result.body, {
      content: [{ type: 'text', text: 'search:{"q":"hello"}' }],
      is_error: false,
      structured_content: { tool: 'search', arguments: { q: 'hello' } },
    });
    assert.equal(server.calls.at(-1)!.headers.authorization, `Bearer ${SECRET}`);
    assertError(
      await call('POST', '/apps/search/tools/echo/call', a.key, { arguments: {} }),
      409,
      'APP_TOOL_NOT_ENABLED',
    );

    const requests = server.requests.length;
    const rotated = await call('POST', '/apps/search/auth/rotate', a.key, {
      auth: { type: 'bearer', secret: NEW_SECRET },
    });
    assert.deepEqual([rotated.status, rotated.body.auth_hint], [200, NEW_SECRET.slice(-4)]);
    assert.equal(server.requests.length, requests, 'a rotate sends nothing to the server');
    const probed = await call('POST', '/apps/search/probe', a.key, {});
    assert.deepEqual(
      [probed.status, probed.body.status, probed.body.consecutive_probe_failures],
      [200, 'auth_failed', 1],
    );
    assert.equal(
      server.requests.at(-1)!.headers.authorization,
      `Bearer ${NEW_SECRET}`,
      'the probe carried the new secret',
    );
    server.requests.length = 0;

    assert.equal((await call('DELETE', '/apps/search', a.key)).status, 204);
    assertError(await call('GET', '/apps/search', a.key), 404, 'APP_NOT_FOUND');
  });

  it('answers a tool call to a server that is down with 503 and the reason', async () => {
    const doomed = await startMcpServer({ transport: 'streamable', tools: [{ name: 'echo' }] });
    await call('POST', '/apps', a.key, { slug: 'gone', display_name: 'Gone', mcp_server_url: doomed.url });
    assert.equal((await settled(a.key, 'gone')).status, 'healthy');
    assert.equal((await call('PATCH', '/apps/gone', a.key, { enabled_tools: ['echo'] })).status, 200);
    await doomed.close();
    const res = await call('POST', '/apps/gone/tools/echo/call', a.key, { arguments: {} });
    assertError(res, 503, 'APP_UNREACHABLE');
    assert.match(res.body.error.message, /could not reach/);
    // One tenant's broken server does not open the circuit: every call still reaches the service.
    for (let i = 0; i < 6; i++)
      assertError(await call('POST', '/apps/gone/tools/echo/call', a.key, { arguments: {} }), 503, 'APP_UNREACHABLE');
    assert.equal((await call('GET', '/apps/gone', a.key)).status, 200);
  });

  it('audits each tool call in the audit log: who, which app and tool, the outcome and duration, never the arguments or result', async () => {
    const ARG = 'e2e-argument-sentinel-0d4f';
    const RESULT = 'e2e-result-sentinel-a71c';
    const audited = await startMcpServer({
      transport: 'streamable',
      tools: [{ name: 'look' }],
      onCall: () => ({ content: [{ type: 'text', text: RESULT }] }),
    });
    await call('POST', '/apps', a.key, { slug: 'audited', display_name: 'Audited', mcp_server_url: audited.url });
    const app = await settled(a.key, 'audited');
    await call('PATCH', '/apps/audited', a.key, { enabled_tools: ['look'] });
    const ok = await call('POST', '/apps/audited/tools/look/call', a.key, { arguments: { q: ARG } });
    assert.equal(ok.status, 200);
    await audited.close();
    assertError(await call('POST', '/apps/audited/tools/look/call', a.key, { arguments: { q: ARG } }), 503);
    const entries = async () =>
      (await call('GET', '/audit-log?action=app.tool_called&resource_type=app', a.key)).body.data.filter(
        (e: { resource_id: string }) => e.resource_id === app.id,
      );
    await eventually('both audit entries', async () => (await entries()).length === 2);
    const [failed, succeeded] = await entries(); // newest first
    for (const e of [failed, succeeded]) {
      assert.equal(e.actor_type, 'api_key');
      assert.equal(e.resource_type, 'app');
      assert.equal(typeof e.metadata.duration_ms, 'number');
      assert.equal(e.metadata.member_id, a.ownerId);
    }
    assert.deepEqual(
      [succeeded.metadata.app_slug, succeeded.metadata.tool, succeeded.metadata.outcome],
      ['audited', 'look', 'ok'],
    );
    assert.deepEqual([failed.metadata.outcome, failed.metadata.failure_category], ['failed', 'unreachable']);
    const text = JSON.stringify(await entries());
    assert.ok(
      !text.includes(ARG) && !text.includes(RESULT),
      'neither the arguments nor the result are in the audit log',
    );
  });

  it('answers a 5 MB tool result with 200 and is_error saying it passed the limit, not 429', async () => {
    const big = await startMcpServer({
      transport: 'streamable',
      tools: [{ name: 'dump' }],
      onCall: () => ({ content: [{ type: 'text', text: 'x'.repeat(5_000_000) }] }),
    });
    after(() => big.close());
    await call('POST', '/apps', a.key, { slug: 'dump', display_name: 'Dump', mcp_server_url: big.url });
    assert.equal((await settled(a.key, 'dump')).status, 'healthy');
    await call('PATCH', '/apps/dump', a.key, { enabled_tools: ['dump'] });
    const res = await call('POST', '/apps/dump/tools/dump/call', a.key, { arguments: {} });
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 300));
    assert.equal(res.body.is_error, true);
    assert.match(res.body.content[0].text, /exceeded the limit of 1048576 bytes \(APPS_TOOL_RESULT_MAX_BYTES\)/);
  });

  it("keeps tenants apart, checks roles, and has no REST route for the agents' tool list", async () => {
    await call('POST', '/apps', b.key, { slug: 'beta-only', display_name: 'B', mcp_server_url: server.url });
    assertError(await call('GET', '/apps/beta-only', a.key), 404, 'APP_NOT_FOUND');
    assertError(await call('PATCH', '/apps/beta-only', a.key, { display_name: 'x' }), 404);
    assertError(await call('POST', '/apps/beta-only/probe', a.key, {}), 404);
    assertError(
      await call('POST', '/apps/beta-only/auth/rotate', a.key, { auth: { type: 'bearer', secret: SECRET } }),
      404,
    );
    assertError(await call('POST', '/apps/beta-only/tools/echo/call', a.key, { arguments: {} }), 404);
    assertError(await call('DELETE', '/apps/beta-only', a.key), 404);
    assert.equal(
      (await call('GET', '/apps', a.key)).body.data.some((x: any) => x.slug === 'beta-only'),
      false,
    );

    const member = async (role: string) => {
      const inv = await call('POST', '/invitations', b.key, { email: `${role}-${randomUUID()}@beta.test`, role });
      const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
      return claimed.body.api_key as string;
    };
    const [memberKey, viewerKey] = [await member('member'), await member('viewer')];
    // member: read on apps (lists and reads), no tool calls (write), no configuration (admin).
    assert.equal((await call('GET', '/apps', memberKey)).status, 200);
    const seen = await call('GET', '/apps/beta-only', memberKey);
    assert.equal(seen.status, 200);
    // Below admin on apps, the URL is reduced to its origin (paths and queries often carry tokens).
    assert.equal(seen.body.mcp_server_url, `${new URL(server.url).origin}/…`);
    assert.equal((await call('GET', '/apps/beta-only', b.key)).body.mcp_server_url, server.url);
    assertError(await call('POST', '/apps/beta-only/tools/echo/call', memberKey, { arguments: {} }), 403);
    assertError(await call('PATCH', '/apps/beta-only', memberKey, { display_name: 'x' }), 403);
    assertError(
      await call('POST', '/apps', memberKey, { slug: 'm-app', display_name: 'x', mcp_server_url: server.url }),
      403,
    );
    assertError(await call('POST', '/apps/beta-only/probe', memberKey, {}), 403);
    // viewer: none on apps.
    assertError(await call('GET', '/apps', viewerKey), 403);
    assertError(await stack.api('GET', '/api/v1/apps'), 401);

    const openapi = await stack.api('GET', '/api/v1/openapi.json');
    const operations = Object.values(openapi.body.paths).flatMap((p: any) =>
      Object.values(p).map((o: any) => o.operationId),
    );
    assert.ok(operations.includes('callTool') && !operations.includes('listAgentTools'), 'ListAgentTools is internal');
  });

  it('refuses an mcp_server_url that is not http(s), naming the field', async () => {
    const res = await call('POST', '/apps', a.key, {
      slug: 'bad-url',
      display_name: 'x',
      mcp_server_url: 'file:///etc/passwd',
    });
    assertError(res, 400);
    assert.deepEqual(violations(res), ['mcp_server_url']);
  });
});

describe('apps through the gateway with EGRESS_ALLOW_PRIVATE=false', () => {
  let stack: TestStack;
  before(async () => {
    stack = await startTestStack({ egress: { allowPrivate: false } });
  });
  after(() => stack.stop());

  it('refuses loopback, private and plain-http URLs with a 400 naming mcp_server_url', async () => {
    const t = await stack.createTenant();
    for (const url of [
      'http://127.0.0.1:8080/mcp',
      'https://127.0.0.1/mcp',
      'https://10.0.0.5/mcp',
      'https://169.254.169.254/',
      'https://localhost/mcp',
      'http://mcp.example.com/mcp',
    ]) {
      const res = await stack.api('POST', '/api/v1/apps', {
        key: t.key,
        body: { slug: 'x-app', display_name: 'x', mcp_server_url: url },
      });
      assertError(res, 400);
      assert.deepEqual(violations(res), ['mcp_server_url'], url);
    }
  });
});
