import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { captureLogs, eventually } from '@workauto/testing';
import { startMcpServer, type McpTestServer } from '@workauto/apps/testing/mcp-servers';
import { assertRecord, fails, ok, startTestStack, violations, type TenantFixture, type TestStack } from './harness.js';

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
    // 10 s: a healthy server beside a second `make test` answers in seconds; a server that is down refuses at once.
    stack = await startTestStack({ apps: { probeTimeoutMs: 10_000, toolCallTimeoutMs: 10_000 } });
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

  const bySlug = (slug: string) => ({ params: { path: { slug } } });
  const tool = (slug: string, name: string) => ({ params: { path: { slug, name } } });
  const settled = async (key: string, slug: string) =>
    eventually(`app ${slug} probed`, async () => {
      const app = await ok(stack.client(key).GET('/api/v1/apps/{slug}', bySlug(slug)));
      return app.status !== 'pending' ? app : undefined;
    });
  /** An app on a test MCP server, without auth, and its tools enabled once it was probed healthy. */
  const healthyApp = async (key: string, slug: string, url: string, tools: string[]) => {
    const api = stack.client(key);
    await ok(api.POST('/api/v1/apps', { body: { slug, display_name: slug, mcp_server_url: url } }), 201);
    const app = await settled(key, slug);
    assert.equal(app.status, 'healthy', app.status_reason ?? '');
    await ok(api.PATCH('/api/v1/apps/{slug}', { ...bySlug(slug), body: { enabled_tools: tools } }));
    return app;
  };

  it('serves every endpoint: create, get, list, patch, probe, call, rotate, delete', async () => {
    const api = stack.client(a.key);
    const search = bySlug('search');
    const created = await ok(
      api.POST('/api/v1/apps', {
        body: {
          slug: 'search',
          display_name: 'Search',
          mcp_server_url: server.url,
          auth: { type: 'bearer', secret: SECRET },
          metadata: { k: 1 },
        },
      }),
      201,
    );
    assertRecord(
      created,
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
      [created.status, created.auth_type, created.auth_hint, created.discovered_tools, created.enabled_tools],
      ['pending', 'bearer', SECRET.slice(-4), [], []],
    );
    assert.equal(JSON.stringify(created).includes(SECRET), false);

    const app = await settled(a.key, 'search');
    assert.equal(app.status, 'healthy', app.status_reason ?? '');
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
      app.discovered_tools.map((t) => t.name),
      ['echo', 'search'],
    );

    const list = await ok(api.GET('/api/v1/apps'));
    assert.deepEqual([list.data.map((x) => x.slug), list.has_more, list.next_cursor], [['search'], false, null]);

    assert.deepEqual(
      violations(await fails(api.PATCH('/api/v1/apps/{slug}', { ...search, body: { enabled_tools: ['nope'] } }), 400)),
      ['enabled_tools[0]'],
    );
    const patched = await ok(
      api.PATCH('/api/v1/apps/{slug}', { ...search, body: { enabled_tools: ['search'], description: 'Finds things' } }),
    );
    assert.deepEqual([patched.enabled_tools, patched.description], [['search'], 'Finds things']);

    const result = await ok(
      api.POST('/api/v1/apps/{slug}/tools/{name}/call', {
        ...tool('search', 'search'),
        body: { arguments: { q: 'hello' } },
      }),
    );
    assert.deepEqual(result, {
      content: [{ type: 'text', text: 'search:{"q":"hello"}' }],
      is_error: false,
      structured_content: { tool: 'search', arguments: { q: 'hello' } },
    });
    assert.equal(server.calls.at(-1)!.headers.authorization, `Bearer ${SECRET}`);
    await fails(
      api.POST('/api/v1/apps/{slug}/tools/{name}/call', { ...tool('search', 'echo'), body: { arguments: {} } }),
      409,
      'APP_TOOL_NOT_ENABLED',
    );

    const requests = server.requests.length;
    const rotated = await ok(
      api.POST('/api/v1/apps/{slug}/auth/rotate', {
        ...search,
        body: { auth: { type: 'bearer', secret: NEW_SECRET } },
      }),
    );
    assert.equal(rotated.auth_hint, NEW_SECRET.slice(-4));
    assert.equal(server.requests.length, requests, 'a rotate sends nothing to the server');
    const probed = await ok(api.POST('/api/v1/apps/{slug}/probe', { ...search, body: {} }));
    assert.deepEqual([probed.status, probed.consecutive_probe_failures], ['auth_failed', 1]);
    assert.equal(
      server.requests.at(-1)!.headers.authorization,
      `Bearer ${NEW_SECRET}`,
      'the probe carried the new secret',
    );
    server.requests.length = 0;

    await ok(api.DELETE('/api/v1/apps/{slug}', search), 204);
    await fails(api.GET('/api/v1/apps/{slug}', search), 404, 'APP_NOT_FOUND');
  });

  it('answers a tool call to a server that is down with 503 and the reason', async () => {
    const api = stack.client(a.key);
    const doomed = await startMcpServer({ transport: 'streamable', tools: [{ name: 'echo' }] });
    await healthyApp(a.key, 'gone', doomed.url, ['echo']);
    await doomed.close();
    const echo = () =>
      api.POST('/api/v1/apps/{slug}/tools/{name}/call', { ...tool('gone', 'echo'), body: { arguments: {} } });
    const res = await fails(echo(), 503, 'APP_UNREACHABLE');
    assert.match(res.body.error.message, /could not reach/);
    // One tenant's broken server does not open the circuit: every call still reaches the service.
    for (let i = 0; i < 6; i++) await fails(echo(), 503, 'APP_UNREACHABLE');
    await ok(api.GET('/api/v1/apps/{slug}', bySlug('gone')));
  });

  it('audits each tool call in the audit log: who, which app and tool, the outcome and duration, never the arguments or result', async () => {
    const api = stack.client(a.key);
    const ARG = 'e2e-argument-sentinel-0d4f';
    const RESULT = 'e2e-result-sentinel-a71c';
    const audited = await startMcpServer({
      transport: 'streamable',
      tools: [{ name: 'look' }],
      onCall: () => ({ content: [{ type: 'text', text: RESULT }] }),
    });
    const app = await healthyApp(a.key, 'audited', audited.url, ['look']);
    const look = () =>
      api.POST('/api/v1/apps/{slug}/tools/{name}/call', {
        ...tool('audited', 'look'),
        body: { arguments: { q: ARG } },
      });
    await ok(look());
    await audited.close();
    await fails(look(), 503);
    const entries = async () =>
      (
        await ok(
          api.GET('/api/v1/audit-log', { params: { query: { action: 'app.tool_called', resource_type: 'app' } } }),
        )
      ).data.filter((e) => e.resource_id === app.id);
    await eventually('both audit entries', async () => (await entries()).length === 2);
    const [failed, succeeded] = await entries(); // newest first
    for (const e of [failed!, succeeded!]) {
      assert.equal(e.actor_type, 'api_key');
      assert.equal(e.resource_type, 'app');
      assert.equal(typeof e.metadata?.duration_ms, 'number');
      assert.equal(e.metadata?.member_id, a.ownerId);
    }
    assert.deepEqual(
      [succeeded!.metadata?.app_slug, succeeded!.metadata?.tool, succeeded!.metadata?.outcome],
      ['audited', 'look', 'ok'],
    );
    assert.deepEqual([failed!.metadata?.outcome, failed!.metadata?.failure_category], ['failed', 'unreachable']);
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
    await healthyApp(a.key, 'dump', big.url, ['dump']);
    const res = await ok(
      stack
        .client(a.key)
        .POST('/api/v1/apps/{slug}/tools/{name}/call', { ...tool('dump', 'dump'), body: { arguments: {} } }),
    );
    assert.equal(res.is_error, true);
    assert.match(String(res.content[0]?.text), /exceeded the limit of 1048576 bytes \(APPS_TOOL_RESULT_MAX_BYTES\)/);
  });

  it("keeps tenants apart, checks roles, and has no REST route for the agents' tool list", async () => {
    const alpha = stack.client(a.key);
    const beta = stack.client(b.key);
    const betaOnly = bySlug('beta-only');
    const echo = tool('beta-only', 'echo');
    await ok(
      beta.POST('/api/v1/apps', { body: { slug: 'beta-only', display_name: 'B', mcp_server_url: server.url } }),
      201,
    );
    await fails(alpha.GET('/api/v1/apps/{slug}', betaOnly), 404, 'APP_NOT_FOUND');
    await fails(alpha.PATCH('/api/v1/apps/{slug}', { ...betaOnly, body: { display_name: 'x' } }), 404);
    await fails(alpha.POST('/api/v1/apps/{slug}/probe', { ...betaOnly, body: {} }), 404);
    await fails(
      alpha.POST('/api/v1/apps/{slug}/auth/rotate', {
        ...betaOnly,
        body: { auth: { type: 'bearer', secret: SECRET } },
      }),
      404,
    );
    await fails(alpha.POST('/api/v1/apps/{slug}/tools/{name}/call', { ...echo, body: { arguments: {} } }), 404);
    await fails(alpha.DELETE('/api/v1/apps/{slug}', betaOnly), 404);
    assert.equal(
      (await ok(alpha.GET('/api/v1/apps'))).data.some((x) => x.slug === 'beta-only'),
      false,
    );

    const member = async (role: 'member' | 'viewer') => {
      const inv = await ok(
        beta.POST('/api/v1/invitations', { body: { email: `${role}-${randomUUID()}@beta.test`, role } }),
        201,
      );
      const claimed = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
      return stack.client(claimed.api_key);
    };
    const [asMember, asViewer] = [await member('member'), await member('viewer')];
    // member: read on apps (lists and reads), no tool calls (write), no configuration (admin).
    await ok(asMember.GET('/api/v1/apps'));
    const seen = await ok(asMember.GET('/api/v1/apps/{slug}', betaOnly));
    // Below admin on apps, the URL is reduced to its origin (paths and queries often carry tokens).
    assert.equal(seen.mcp_server_url, `${new URL(server.url).origin}/…`);
    assert.equal((await ok(beta.GET('/api/v1/apps/{slug}', betaOnly))).mcp_server_url, server.url);
    await fails(asMember.POST('/api/v1/apps/{slug}/tools/{name}/call', { ...echo, body: { arguments: {} } }), 403);
    await fails(asMember.PATCH('/api/v1/apps/{slug}', { ...betaOnly, body: { display_name: 'x' } }), 403);
    await fails(
      asMember.POST('/api/v1/apps', { body: { slug: 'm-app', display_name: 'x', mcp_server_url: server.url } }),
      403,
    );
    await fails(asMember.POST('/api/v1/apps/{slug}/probe', { ...betaOnly, body: {} }), 403);
    // viewer: none on apps.
    await fails(asViewer.GET('/api/v1/apps'), 403);
    await fails(stack.client().GET('/api/v1/apps'), 401);

    const openapi = await stack.api('GET', '/api/v1/openapi.json'); // the document itself is not one of its paths
    const operations = Object.values(openapi.body.paths).flatMap((p: any) =>
      Object.values(p).map((o: any) => o.operationId),
    );
    assert.ok(operations.includes('callTool') && !operations.includes('listAgentTools'), 'ListAgentTools is internal');
  });

  it('refuses an mcp_server_url that is not http(s), naming the field', async () => {
    const res = await fails(
      stack
        .client(a.key)
        .POST('/api/v1/apps', { body: { slug: 'bad-url', display_name: 'x', mcp_server_url: 'file:///etc/passwd' } }),
      400,
    );
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
      const res = await fails(
        stack.client(t.key).POST('/api/v1/apps', { body: { slug: 'x-app', display_name: 'x', mcp_server_url: url } }),
        400,
      );
      assert.deepEqual(violations(res), ['mcp_server_url'], url);
    }
  });
});
