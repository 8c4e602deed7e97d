/**
 * Agents through the gateway: every endpoint over HTTP with the whole product on loopback and a
 * fake LLM provider (OpenAI's and Anthropic's HTTP APIs) on loopback too.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { FakeProvider, FakeProviderProcess, fakeProviderSettings } from '@workauto/agents/testing';
import { startMcpServer } from '@workauto/apps/testing/mcp-servers';
import { consent, OAuthMcpServer } from '@workauto/apps/testing/oauth-mcp-server';
import { captureLogs, eventually, freePort } from '@workauto/testing';
import { createLogger } from '@workauto/logger';
import type { Schemas } from '@workauto/client';
import {
  assertError,
  assertRecord,
  fails,
  ok,
  startTestStack,
  violations,
  type TenantFixture,
  type TestStack,
} from './harness.js';

/** Every provider key the tests send: none may reach a log line. */
const sentKeys: string[] = [];
const key = (prefix: 'sk-' | 'sk-ant-') => {
  const k = `${prefix}${randomUUID().replace(/-/g, '')}${randomUUID().replace(/-/g, '')}`;
  sentKeys.push(k);
  return k;
};

/** What a finished run's `output` holds (the document types it as any JSON). */
type RunOutput = { text?: string; steps?: number; tool_calls: { name: string; is_error: boolean }[] };

describe('agents through the gateway', () => {
  let stack: TestStack;
  let fake: FakeProvider;
  let a: TenantFixture;
  let b: TenantFixture;
  let member: string;
  let viewer: string;
  let logs: ReturnType<typeof captureLogs>;
  /** The typed client acting with key `k`. */
  const as = (k: string) => stack.client(k);
  /** Raw calls: bodies and queries the document refuses (a wrong type, an unknown field, a missing one). */
  const call = (method: string, path: string, k: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key: k, ...(body === undefined ? {} : { body }) });
  const bp = (blueprint: string) => ({ params: { path: { blueprint } } });
  const ofRun = (blueprint: string, id: string) => ({ params: { path: { blueprint, id } } });
  const bySlug = (slug: string) => ({ params: { path: { slug } } });
  /** PUT /agent-configs/{blueprint}/byok-key with tenant A's key (or `k`), which must answer 200. */
  const setByok = (blueprint: string, body: Schemas['PutByokKeyBody'], k = a.key) =>
    ok(as(k).PUT('/api/v1/agent-configs/{blueprint}/byok-key', { ...bp(blueprint), body }));
  /** A run once it succeeded or failed. */
  const ended = (blueprint: string, id: string, k = a.key, ms = 20_000) =>
    eventually(
      'the run ends',
      async () => {
        const run = await ok(as(k).GET('/api/v1/agents/{blueprint}/runs/{id}', ofRun(blueprint, id)));
        return run.status === 'succeeded' || run.status === 'failed' ? run : undefined;
      },
      ms,
      50,
    );
  /** The audit entries of tenant A with these filters (the first page). */
  const auditLog = async (query: { action?: string; resource_type?: string }) =>
    (await ok(as(a.key).GET('/api/v1/audit-log', { params: { query } }))).data;

  before(async () => {
    fake = await FakeProvider.start();
    // Every service and the gateway log at debug level into the capture.
    logs = captureLogs();
    const port = await freePort();
    stack = await startTestStack({
      logger: createLogger('e2e', 'debug'),
      // OAuth apps' consents come back to this gateway and end on the tenant's web app.
      gatewayPort: port,
      apps: {
        oauth: { redirectBaseUrl: `http://127.0.0.1:${port}`, allowedReturnOrigins: ['https://app.example.com'] },
      },
      agents: {
        providers: fakeProviderSettings(fake),
        runs: { heartbeatMs: 200, pollMs: 50, schedulerPollMs: 200 },
      },
    });
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
    const invite = async (role: 'member' | 'viewer') => {
      const inv = await ok(
        as(a.key).POST('/api/v1/invitations', { body: { email: `${role}-${randomUUID()}@alpha.test`, role } }),
        201,
      );
      return (await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }))).api_key;
    };
    member = await invite('member');
    viewer = await invite('viewer');
  });
  after(async () => {
    await stack?.stop();
    await fake?.stop();
    logs?.stop();
  });

  it('GET /agent-blueprints: the envelope of blueprints with models and tools', async () => {
    const res = await ok(as(a.key).GET('/api/v1/agent-blueprints'));
    assert.equal(res.has_more, false);
    assert.equal(res.next_cursor ?? null, null);
    for (const blueprint of res.data) {
      assertRecord(
        blueprint,
        { id: 'string', name: 'string', description: 'string', models: 'object', tools: 'array' },
        'blueprint',
      );
      assert.equal(typeof blueprint.models?.openai, 'string');
      assert.equal(typeof blueprint.models?.anthropic, 'string');
    }
    await fails(as(a.key).GET('/api/v1/agent-blueprints', { params: { query: { limit: 0 } } }), 400);
  });

  it('GET|PUT /agent-configs: a bare array, full replace, 404 for an unknown blueprint or none yet, 400s naming fields', async () => {
    const api = as(a.key);
    const triage = bp('task-triage');
    assert.deepEqual(await ok(api.GET('/api/v1/agent-configs')), []);
    await fails(api.GET('/api/v1/agent-configs/{blueprint}', triage), 404, 'AGENT_CONFIG_NOT_FOUND');
    await fails(api.GET('/api/v1/agent-configs/{blueprint}', bp('nope')), 404, 'AGENT_BLUEPRINT_NOT_FOUND');
    const put = await ok(
      api.PUT('/api/v1/agent-configs/{blueprint}', {
        ...triage,
        body: {
          budget_default_cents: 500,
          deadline_default_seconds: 60,
          schedule: '0 9 * * 1-5',
          guardrails: [{ type: 'max_tool_calls', value: 5 }],
        },
      }),
    );
    assertRecord(
      put,
      {
        id: 'uuid',
        tenant_id: 'uuid',
        agent_blueprint: 'string',
        byok_status: 'string',
        guardrails: 'array',
        created_at: 'date-time',
        updated_at: 'date-time',
      },
      'config',
    );
    assert.equal(put.tenant_id, a.id);
    assert.equal(put.byok_status, 'unset');
    assert.equal(put.budget_default_cents, 500);
    assert.equal(put.schedule, '0 9 * * 1-5');
    for (const internal of ['byok_ciphertext', 'byok_key_version', 'key_version', 'disable_reason', 'schedule_next_at'])
      assert.ok(!(internal in put), internal);
    const replaced = await ok(api.PUT('/api/v1/agent-configs/{blueprint}', { ...triage, body: {} }));
    assert.deepEqual(replaced.guardrails, []);
    assert.equal(replaced.schedule ?? null, null);
    assert.equal(replaced.budget_default_cents ?? null, null);
    const listed = await ok(api.GET('/api/v1/agent-configs'));
    assert.deepEqual(
      listed.map((c) => c.agent_blueprint),
      ['task-triage'],
    );
    assert.equal((await ok(api.GET('/api/v1/agent-configs/{blueprint}', triage))).id, put.id);

    const bad = await fails(
      api.PUT('/api/v1/agent-configs/{blueprint}', {
        ...triage,
        body: { schedule: '* * * *', guardrails: [{ type: 'block_pattern', pattern: '(' }] },
      }),
      400,
    );
    assert.deepEqual(violations(bad), ['schedule', 'guardrails[0].pattern']);
    // Raw: guardrails not a list, a field a config does not have, a number sent as text.
    assert.deepEqual(
      violations(await call('PUT', '/agent-configs/task-triage', a.key, { guardrails: { type: 'deny_tools' } })),
      ['guardrails'],
    );
    assertError(
      await call('PUT', '/agent-configs/task-triage', a.key, { schedule: '@daily', api_key: 'sk-nope' }),
      400,
    );
    assertError(await call('PUT', '/agent-configs/task-triage', a.key, { deadline_default_seconds: 'soon' }), 400);
    // Tenant B sees none of A's.
    assert.deepEqual(await ok(as(b.key).GET('/api/v1/agent-configs')), []);
    await fails(as(b.key).GET('/api/v1/agent-configs/{blueprint}', triage), 404);
  });

  it('POST /agent-configs/validate-key: a ProbeResult for every outcome, 200 once the body is valid', async () => {
    const validate = (body: Schemas['ValidateKeyRequest']) =>
      as(a.key).POST('/api/v1/agent-configs/validate-key', { body });
    const good = key('sk-ant-');
    fake.probes.set(good, 'ok');
    const valid = await ok(validate({ api_key: good }));
    assert.deepEqual(valid.status, 'valid');
    assert.equal(valid.category ?? null, null);
    for (const [outcome, category] of [
      [401, 'invalid_key'],
      [403, 'permission_denied'],
      [402, 'insufficient_quota'],
      [429, 'rate_limited'],
      [529, 'provider_unavailable'],
    ] as const) {
      const k = key('sk-');
      fake.probes.set(k, outcome);
      const res = await ok(validate({ api_key: k, provider: 'openai' }));
      assert.equal(res.status, 'invalid');
      assert.equal(res.category, category);
      assert.equal(typeof res.message, 'string');
      assert.ok(!JSON.stringify(res).includes(k));
    }
    assert.deepEqual(violations(await fails(validate({ api_key: good, provider: 'mistral' as 'openai' }), 400)), [
      'provider',
    ]);
    // Raw: a body without its required api_key.
    assert.deepEqual(violations(await call('POST', '/agent-configs/validate-key', a.key, {})), ['api_key']);
  });

  it('PUT|DELETE /agent-configs/{blueprint}/byok-key: 200 valid, 400 BYOK_KEY_INVALID, 503 BYOK_PROBE_UNAVAILABLE, then unset', async () => {
    const api = as(a.key);
    const review = bp('pipeline-review');
    const putKey = (api_key: string) =>
      api.PUT('/api/v1/agent-configs/{blueprint}/byok-key', { ...review, body: { api_key } });
    const good = key('sk-');
    fake.probes.set(good, 'ok');
    const stored = await ok(putKey(good));
    assert.equal(stored.byok_status, 'valid');
    assert.match(stored.byok_last_probed_at ?? '', /Z$/);
    const refused = key('sk-');
    fake.probes.set(refused, 401);
    const invalid = await fails(putKey(refused), 400, 'BYOK_KEY_INVALID');
    assert.equal(invalid.body.error.details[0].metadata.category, 'invalid_key');
    const down = key('sk-');
    fake.probes.set(down, 500);
    const unavailable = await fails(putKey(down), 503, 'BYOK_PROBE_UNAVAILABLE');
    assert.equal(unavailable.body.error.details[0].metadata.category, 'provider_unavailable');
    for (const res of [invalid, unavailable])
      assert.ok(!JSON.stringify(res.body).includes(refused) && !JSON.stringify(res.body).includes(down));
    const still = await ok(api.GET('/api/v1/agent-configs/{blueprint}', review));
    assert.equal(still.byok_status, 'valid');
    assert.equal(still.byok_last_probed_at, stored.byok_last_probed_at);
    // The breaker of the route stays closed after a 503 the service answered itself.
    const again = key('sk-');
    fake.probes.set(again, 'ok');
    await ok(putKey(again));
    const removed = await ok(api.DELETE('/api/v1/agent-configs/{blueprint}/byok-key', review));
    assert.equal(removed.byok_status, 'unset');
    await fails(api.DELETE('/api/v1/agent-configs/{blueprint}/byok-key', bp('daily-briefing')), 404);
    await fails(as(b.key).DELETE('/api/v1/agent-configs/{blueprint}/byok-key', review), 404);
  });

  it('audits config and key changes without the key', async () => {
    const k = key('sk-');
    fake.probes.set(k, 'ok');
    await as(a.key).PUT('/api/v1/agent-configs/{blueprint}/byok-key', {
      ...bp('daily-briefing'),
      body: { api_key: k },
    });
    await eventually('the audit entry', async () =>
      (await auditLog({ resource_type: 'agent_config' })).some((e) => e.action === 'agent_config.byok_key_set'),
    );
    assert.ok(!JSON.stringify(await auditLog({ resource_type: 'agent_config' })).includes(k));
  });

  it('POST|GET /agents/{blueprint}/runs and cancel: a run creates a task as its agent (audited so), pages by RFC 3339 cursor', async () => {
    const api = as(a.key);
    const triage = bp('task-triage');
    const k = key('sk-');
    fake.script(k, [
      {
        tools: [{ name: 'create_task', arguments: { title: 'Call ACME back' } }],
        usage: { input: 10_000, output: 1_000 },
      },
      { text: 'One task created.', usage: { input: 10_000, output: 1_000 } },
    ]);
    await setByok('task-triage', { api_key: k, provider: 'openai' });
    const keyed = () =>
      api.POST('/api/v1/agents/{blueprint}/runs', {
        params: { ...triage.params, header: { 'Idempotency-Key': 'run-1' } },
        body: { input: { note: 'triage' } },
      });
    const created = await ok(keyed(), 201);
    assertRecord(
      created,
      {
        id: 'uuid',
        tenant_id: 'uuid',
        agent_blueprint: 'string',
        status: 'string',
        consecutive_failures: 'integer',
        cost_usd_cents: 'integer',
        platform_fee_cents: 'integer',
        input: 'object',
        run_at: 'date-time',
        created_at: 'date-time',
        updated_at: 'date-time',
      },
      'run',
    );
    assert.equal(created.status, 'queued');
    for (const internal of ['worker_id', 'lease_expires_at', 'last_heartbeat_at', 'claims', 'disable_reason'])
      assert.ok(!(internal in created), internal);
    const replay = await ok(keyed(), 201);
    assert.equal(replay.id, created.id, 'an Idempotency-Key replays the first run, no second one');
    const run = await ended('task-triage', created.id);
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.deepEqual(run.output, {
      text: 'One task created.',
      steps: 2,
      tool_calls: [{ name: 'create_task', is_error: false }],
    });
    assert.equal(run.cost_usd_cents, 2);
    assert.equal(run.failure_category ?? null, null);
    const stepsOf = (k2: string) =>
      as(k2).GET('/api/v1/agents/{blueprint}/runs/{id}/steps', ofRun('task-triage', run.id));
    const steps = (await ok(stepsOf(a.key))).data;
    assert.deepEqual(
      steps.map((x) => [x.index, x.type, x.tool_name ?? null]),
      [
        [0, 'model_call', null],
        [1, 'tool_call', 'create_task'],
        [2, 'model_call', null],
      ],
    );
    assertRecord(
      steps[0],
      { index: 'integer', type: 'string', started_at: 'date-time', ended_at: 'date-time' },
      'step',
    );
    assert.deepEqual(
      [steps[0]!.input_tokens, steps[0]!.output_tokens, steps[0]!.cost_usd_cents],
      [10_000, 1_000, 0.56],
    );
    assert.deepEqual(steps[1]!.arguments, { title: 'Call ACME back' });
    assert.equal(steps[1]!.is_error, false);
    assert.equal(JSON.parse(steps[1]!.result!).title, 'Call ACME back');
    assert.equal(steps[2]!.result, 'One task created.');
    await ok(stepsOf(member)); // read suffices
    await fails(stepsOf(viewer), 403);
    await fails(stepsOf(b.key), 404, 'AGENT_RUN_NOT_FOUND');
    const tasks = await ok(api.GET('/api/v1/tasks'));
    assert.deepEqual(
      tasks.data.map((x) => x.title),
      ['Call ACME back'],
    );
    await eventually(
      "the audit entry of the agent's task",
      async () => (await auditLog({ action: 'task.created' })).length === 1,
    );
    const entry = (await auditLog({ action: 'task.created' }))[0]!;
    assert.equal(entry.actor_type, 'agent');
    assert.equal(entry.actor_id, run.id);
    assert.equal(entry.resource_id, tasks.data[0]!.id);

    const later = new Date(Date.now() + 3_600_000).toISOString();
    const queued = await ok(
      api.POST('/api/v1/agents/{blueprint}/runs', {
        ...triage,
        body: { input: 'later', run_at: later, budget_usd_cents: 50, deadline_seconds: 30 },
      }),
      201,
    );
    assert.equal(queued.budget_usd_cents, 50);
    const cancel = (id: string, k2 = a.key) =>
      as(k2).POST('/api/v1/agents/{blueprint}/runs/{id}/cancel', { ...ofRun('task-triage', id), body: {} });
    const cancelled = await ok(cancel(queued.id));
    assert.equal(cancelled.status, 'cancelled');
    await ok(cancel(queued.id));
    await fails(cancel(run.id), 409, 'AGENT_RUN_FINISHED');
    await fails(cancel(run.id, b.key), 404);

    const runs = (query: { limit?: number; cursor?: string; status?: 'succeeded' }, k2 = a.key) =>
      as(k2).GET('/api/v1/agents/{blueprint}/runs', { params: { ...triage.params, query } });
    const page1 = await ok(runs({ limit: 1 }));
    assert.deepEqual(
      page1.data.map((r) => r.id),
      [queued.id],
    );
    assert.equal(page1.has_more, true);
    assert.equal(page1.next_cursor, page1.data[0]!.created_at);
    const page2 = await ok(runs({ limit: 1, cursor: page1.next_cursor! }));
    assert.deepEqual(
      page2.data.map((r) => r.id),
      [run.id],
    );
    assert.equal(page2.has_more, false);
    assert.equal(page2.next_cursor ?? null, null);
    const succeeded = await ok(runs({ status: 'succeeded' }));
    assert.deepEqual(
      succeeded.data.map((r) => r.id),
      [run.id],
    );
    assert.deepEqual(violations(await fails(runs({ status: 'done' as 'succeeded' }), 400)), ['status']);
    assert.deepEqual(violations(await fails(runs({ cursor: 'abc' }), 400)), ['cursor']);
    await fails(api.GET('/api/v1/agents/{blueprint}/runs', bp('nope')), 404, 'AGENT_BLUEPRINT_NOT_FOUND');
    await fails(api.GET('/api/v1/agents/{blueprint}/runs/{id}', ofRun('task-triage', 'not-a-uuid')), 400);
    await fails(as(b.key).GET('/api/v1/agents/{blueprint}/runs/{id}', ofRun('task-triage', run.id)), 404);
    assert.deepEqual((await ok(runs({}, b.key))).data, []);
    await fails(api.POST('/api/v1/agents/{blueprint}/runs', { ...triage, body: { deadline_seconds: 0 } }), 400);
  });

  it("calls an app's tool through the apps service (the MCP server receives it) beside a built-in tool; a dead app fails the run app_unavailable", async () => {
    const api = as(a.key);
    const secret = `mcp-secret-${randomUUID()}`;
    const mcp = await startMcpServer({
      transport: 'streamable',
      auth: { header: 'authorization', value: `Bearer ${secret}` },
      tools: [{ name: 'lookup', description: 'Finds a customer' }],
    });
    try {
      await ok(
        api.POST('/api/v1/apps', {
          body: { slug: 'crm-app', display_name: 'CRM app', mcp_server_url: mcp.url, auth: { type: 'bearer', secret } },
        }),
        201,
      );
      assert.equal(
        (await ok(api.POST('/api/v1/apps/{slug}/probe', { ...bySlug('crm-app'), body: {} }))).status,
        'healthy',
      );
      await ok(api.PATCH('/api/v1/apps/{slug}', { ...bySlug('crm-app'), body: { enabled_tools: ['lookup'] } }));
      const k = key('sk-');
      fake.script(k, [
        {
          tools: [
            { name: 'crm-app__lookup', arguments: { q: 'acme' } },
            { name: 'create_task', arguments: { title: 'Call the customer found' } },
          ],
        },
        { text: 'Found and filed.' },
      ]);
      await setByok('task-triage', { api_key: k, provider: 'openai' });
      const created = await ok(
        api.POST('/api/v1/agents/{blueprint}/runs', { ...bp('task-triage'), body: { input: 'find acme' } }),
        201,
      );
      const run = await ended('task-triage', created.id);
      assert.equal(run.status, 'succeeded', JSON.stringify(run));
      assert.deepEqual((run.output as RunOutput).tool_calls, [
        { name: 'crm-app__lookup', is_error: false },
        { name: 'create_task', is_error: false },
      ]);
      assert.deepEqual(
        mcp.calls.map((c) => [c.name, c.arguments]),
        [['lookup', { q: 'acme' }]],
        'the MCP server received the call',
      );
      const [first, second] = fake.chats(k).map((r) => JSON.parse(r.body));
      assert.ok(
        first.tools.some(
          (x: { function: { name: string; description: string } }) =>
            x.function.name === 'crm-app__lookup' && x.function.description === 'Finds a customer',
        ),
      );
      const toolResults = second.messages
        .filter((m: { role: string }) => m.role === 'tool')
        .map((m: { content: string }) => m.content);
      assert.ok(toolResults[0].includes('acme'), `the app's result went back to the model: ${toolResults[0]}`);
      await eventually("the audit log has the agent's app tool call", async () =>
        (await auditLog({ resource_type: 'task' })).some((e) => e.actor_type === 'agent' && e.actor_id === run.id),
      );
      const toolCalled = await eventually('the audit entry of the app tool call, by the run', async () =>
        (await auditLog({ action: 'app.tool_called' })).find((e) => e.actor_id === run.id),
      );
      assert.equal(toolCalled.actor_type, 'agent');
      assert.equal(toolCalled.resource_type, 'app');
      assert.deepEqual(
        [toolCalled.metadata?.app_slug, toolCalled.metadata?.tool, toolCalled.metadata?.outcome],
        ['crm-app', 'lookup', 'ok'],
      );
      assert.ok(!JSON.stringify(toolCalled).includes('acme'), 'never the arguments');

      await mcp.close();
      const k2 = key('sk-');
      fake.script(k2, [{ tools: [{ name: 'crm-app__lookup', arguments: {} }] }, { text: 'never' }]);
      await setByok('task-triage', { api_key: k2, provider: 'openai' });
      const second2 = await ok(
        api.POST('/api/v1/agents/{blueprint}/runs', { ...bp('task-triage'), body: { input: 'again' } }),
        201,
      );
      const failed = await ended('task-triage', second2.id, a.key, 30_000);
      assert.equal(failed.status, 'failed', JSON.stringify(failed));
      assert.equal(failed.failure_category, 'app_unavailable', failed.failure_detail ?? '');
      assert.match(failed.failure_detail ?? '', /crm-app__lookup/);
      assert.ok(!failed.failure_detail!.includes(secret));
    } finally {
      await mcp.close().catch(() => undefined);
    }
  });

  it('runs with an OAuth app like any other app; a run whose app needs authorization fails app_needs_authorization', async () => {
    const api = as(a.key);
    const server = await OAuthMcpServer.start();
    const runToEnd = async (input: string) => {
      const created = await ok(
        api.POST('/api/v1/agents/{blueprint}/runs', { ...bp('task-triage'), body: { input } }),
        201,
      );
      return ended('task-triage', created.id);
    };
    const oauthApp = bySlug('oauth-app');
    try {
      const created = await ok(
        api.POST('/api/v1/apps', {
          body: {
            slug: 'oauth-app',
            display_name: 'OAuth app',
            mcp_server_url: server.mcpUrl,
            auth: { type: 'oauth2' },
          },
        }),
        201,
      );
      assert.equal(created.status, 'needs_authorization');
      // The admin's authorize, the user's consent, the callback through the gateway (no credential).
      const started = await ok(
        api.POST('/api/v1/apps/{slug}/oauth/authorize', {
          ...oauthApp,
          body: { return_to: 'https://app.example.com/apps' },
        }),
      );
      const callbackUrl = await consent(started.authorization_url);
      assert.equal(callbackUrl.origin + callbackUrl.pathname, `${stack.url}/api/v1/apps/oauth/callback`);
      // Raw: the browser's redirect back through the gateway.
      const callback = await fetch(callbackUrl, { redirect: 'manual' });
      assert.equal(callback.status, 302);
      assert.equal(callback.headers.get('location'), 'https://app.example.com/apps?status=connected&app=oauth-app');
      assert.equal((await fetch(callbackUrl, { redirect: 'manual' })).status, 400, 'the state is single-use');
      await eventually(
        'the connected app is probed healthy',
        async () => (await ok(api.GET('/api/v1/apps/{slug}', oauthApp))).status === 'healthy',
      );
      await ok(api.PATCH('/api/v1/apps/{slug}', { ...oauthApp, body: { enabled_tools: ['echo'] } }));

      const k = key('sk-');
      fake.script(k, [
        { tools: [{ name: 'oauth-app__echo', arguments: { text: 'from the run' } }] },
        { text: 'Done.' },
      ]);
      await setByok('task-triage', { api_key: k, provider: 'openai' });
      const succeeded = await runToEnd('echo something');
      assert.equal(succeeded.status, 'succeeded', JSON.stringify(succeeded));
      assert.deepEqual((succeeded.output as RunOutput).tool_calls, [{ name: 'oauth-app__echo', is_error: false }]);
      assert.deepEqual(
        (await server.stats()).toolCalls.map((c) => c.name),
        ['echo'],
      );

      // The authorization server drops the tokens it gave: the next run's call cannot be refreshed.
      await server.control({ expireAccessTokens: true, revokeRefreshTokens: true });
      const k2 = key('sk-');
      fake.script(k2, [{ tools: [{ name: 'oauth-app__echo', arguments: { text: 'again' } }] }, { text: 'never' }]);
      await setByok('task-triage', { api_key: k2, provider: 'openai' });
      const refused = await runToEnd('echo again');
      assert.equal(refused.status, 'failed', JSON.stringify(refused));
      assert.equal(refused.failure_category, 'app_needs_authorization', refused.failure_detail ?? '');
      assert.match(refused.failure_detail ?? '', /POST \/api\/v1\/apps\/oauth-app\/oauth\/authorize/);
      assert.equal((await ok(api.GET('/api/v1/apps/{slug}', oauthApp))).status, 'needs_authorization');
      await eventually('the audit log has app.authorization_required', async () =>
        (await auditLog({ action: 'app.authorization_required' })).some((e) => e.resource_id === created.id),
      );
      const issued = (await server.stats()).issued;
      assert.ok(issued.length > 0);
      for (const secret of issued) assert.equal(logs.text().includes(secret), false, `a log line holds ${secret}`);
    } finally {
      await server.stop();
    }
  });

  it("runs a model of the tenant's choosing on its own OpenAI-compatible server (a process of its own) through the API", async () => {
    const api = as(b.key);
    const review = bp('pipeline-review');
    const server = await FakeProviderProcess.start({ only: 'openai' });
    try {
      const k = key('sk-');
      await server.probe(k, 'ok');
      const noKey = await fails(
        api.PUT('/api/v1/agent-configs/{blueprint}', { ...review, body: { base_url: server.openaiBaseUrl } }),
        400,
      );
      assert.deepEqual(violations(noKey), ['base_url']);
      const probed = await ok(
        api.POST('/api/v1/agent-configs/validate-key', {
          body: { api_key: k, provider: 'openai', base_url: server.openaiBaseUrl },
        }),
      );
      assert.equal(probed.status, 'valid');
      assert.deepEqual(
        violations(
          await fails(
            api.POST('/api/v1/agent-configs/validate-key', { body: { api_key: k, base_url: 'https://x.test/v 1' } }),
            400,
          ),
        ),
        ['base_url'],
      );
      await setByok('pipeline-review', { api_key: k, provider: 'openai', base_url: server.openaiBaseUrl }, b.key);
      const config = await ok(
        api.PUT('/api/v1/agent-configs/{blueprint}', {
          ...review,
          body: {
            model: 'qwen2.5:7b',
            base_url: server.openaiBaseUrl,
            input_price_cents_per_mtok: 0,
            output_price_cents_per_mtok: 0,
          },
        }),
      );
      assert.deepEqual(
        [config.model, config.base_url, config.input_price_cents_per_mtok, config.provider ?? null],
        ['qwen2.5:7b', server.openaiBaseUrl, 0, null],
      );
      await server.script(k, [{ text: 'Reviewed on our own hardware.' }]);
      const created = await ok(
        api.POST('/api/v1/agents/{blueprint}/runs', { ...review, body: { input: 'review' } }),
        201,
      );
      const run = await ended('pipeline-review', created.id, b.key);
      assert.equal(run.status, 'succeeded', JSON.stringify(run));
      assert.equal(run.cost_usd_cents, 0);
      const [chat] = await server.chats(k);
      assert.equal(JSON.parse(chat!.body).model, 'qwen2.5:7b');
      assert.equal(fake.chats(k).length, 0, "the platform's provider got nothing");
    } finally {
      await server.stop();
    }
  });

  it('lists calendar events as the agent (daily-briefing) and writes the briefing as a note', async () => {
    const api = as(a.key);
    const cal = await ok(api.POST('/api/v1/calendars', { body: { name: 'Team' } }), 201);
    const start = new Date(Date.now() + 3_600_000);
    await ok(
      api.POST('/api/v1/events', {
        body: {
          calendar_id: cal.id,
          title: 'Board meeting',
          start_at: start.toISOString(),
          end_at: new Date(start.getTime() + 3_600_000).toISOString(),
        },
      }),
      201,
    );
    const k = key('sk-');
    fake.script(k, [
      { tools: [{ name: 'list_calendar_events', arguments: {} }] },
      { tools: [{ name: 'create_note', arguments: { title: 'Briefing', body: 'Board meeting in an hour.' } }] },
      { text: 'Briefing written.' },
    ]);
    await setByok('daily-briefing', { api_key: k, provider: 'openai' });
    const created = await ok(api.POST('/api/v1/agents/{blueprint}/runs', { ...bp('daily-briefing'), body: {} }), 201);
    const run = await ended('daily-briefing', created.id);
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.deepEqual((run.output as RunOutput).tool_calls, [
      { name: 'list_calendar_events', is_error: false },
      { name: 'create_note', is_error: false },
    ]);
    const second = JSON.parse(fake.chats(k)[1]!.body);
    const listed = JSON.parse(second.messages.find((m: { role: string }) => m.role === 'tool').content);
    assert.deepEqual(
      listed.data.map((e: { title: string }) => e.title),
      ['Board meeting'],
      "the calendar's events, as the API lists them",
    );
    const notes = await ok(api.GET('/api/v1/notes', { params: { query: { q: 'Board' } } }));
    assert.deepEqual(
      notes.data.map((n) => n.title),
      ['Briefing'],
    );
  });

  it('applies the role matrix: reads need read, runs write, configs and keys admin; viewers have none', async () => {
    const k = key('sk-');
    fake.probes.set(k, 'ok');
    const asMember = as(member);
    const asViewer = as(viewer);
    const triage = bp('task-triage');
    await ok(asMember.GET('/api/v1/agent-configs'));
    await ok(asMember.GET('/api/v1/agent-blueprints'));
    await fails(asMember.PUT('/api/v1/agent-configs/{blueprint}', { ...triage, body: {} }), 403);
    await fails(asMember.POST('/api/v1/agent-configs/validate-key', { body: { api_key: k } }), 403);
    await fails(asMember.PUT('/api/v1/agent-configs/{blueprint}/byok-key', { ...triage, body: { api_key: k } }), 403);
    await fails(asMember.DELETE('/api/v1/agent-configs/{blueprint}/byok-key', triage), 403);
    await fails(asMember.POST('/api/v1/agents/{blueprint}/runs', { ...triage, body: { input: 'x' } }), 403);
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const run = await ok(
      as(a.key).POST('/api/v1/agents/{blueprint}/runs', { ...triage, body: { input: 'roles', run_at: later } }),
      201,
    );
    const thisRun = ofRun('task-triage', run.id);
    await ok(asMember.GET('/api/v1/agents/{blueprint}/runs', triage));
    await ok(asMember.GET('/api/v1/agents/{blueprint}/runs/{id}', thisRun));
    await fails(asMember.POST('/api/v1/agents/{blueprint}/runs/{id}/cancel', { ...thisRun, body: {} }), 403);
    await fails(asViewer.GET('/api/v1/agents/{blueprint}/runs/{id}', thisRun), 403);
    await fails(asViewer.GET('/api/v1/agent-configs/{blueprint}', triage), 403);
    await fails(asViewer.GET('/api/v1/agent-configs'), 403);
    await fails(asViewer.GET('/api/v1/agent-blueprints'), 403);
    await fails(asViewer.GET('/api/v1/agents/{blueprint}/runs', triage), 403);
    await fails(stack.client().GET('/api/v1/agent-configs'), 401);
  });

  it("starts a run only for a member who may act in every domain of the blueprint's tools: crm none is a 403 naming crm, crm read a 201", async () => {
    const owner = as(a.key);
    const review = bp('pipeline-review');
    const inv = await ok(
      owner.POST('/api/v1/invitations', { body: { email: `runner-${randomUUID()}@alpha.test`, role: 'member' } }),
      201,
    );
    const claimed = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
    const runner = as(claimed.api_key);
    const policies = (crm: 'none' | 'read') =>
      ok(
        owner.PUT('/api/v1/members/{member_id}/access-policies', {
          params: { path: { member_id: claimed.member!.id } },
          body: {
            policies: [
              { domain: 'agents', access_level: 'write' },
              { domain: 'crm', access_level: crm },
            ],
          },
        }),
      );
    await policies('none');
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const start = () =>
      runner.POST('/api/v1/agents/{blueprint}/runs', { ...review, body: { input: 'x', run_at: later } });
    const refused = await fails(start(), 403, 'ACCESS_DENIED');
    assert.deepEqual(refused.body.error.details[0].metadata, {
      domain: 'crm',
      required_level: 'read',
      actual_level: 'none',
    });
    assert.match(refused.body.error.message, /crm/);
    assert.deepEqual((await ok(owner.GET('/api/v1/agents/{blueprint}/runs', review))).data, [], 'no run was made');
    await policies('read');
    const created = await ok(start(), 201);
    assert.equal(created.status, 'queued');
    await ok(
      owner.POST('/api/v1/agents/{blueprint}/runs/{id}/cancel', { ...ofRun('pipeline-review', created.id), body: {} }),
    );
  });

  it('never writes a provider key to any log line of the gateway or a service, at debug level', () => {
    const text = logs.text();
    assert.ok(text.includes('"level":"debug"'), 'debug lines were captured');
    assert.ok(sentKeys.length >= 10);
    for (const k of sentKeys) assert.ok(!text.includes(k), 'a provider key reached the logs');
  });
});
