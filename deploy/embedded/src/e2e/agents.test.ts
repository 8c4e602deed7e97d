/**
 * Agents through the gateway: every endpoint over HTTP with the whole product on loopback and a
 * fake LLM provider (OpenAI's and Anthropic's HTTP APIs) on loopback too.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { FakeProvider, FakeProviderProcess } from '@workauto/agents/testing';
import { startMcpServer } from '@workauto/apps/testing/mcp-servers';
import { consent, OAuthMcpServer } from '@workauto/apps/testing/oauth-mcp-server';
import { captureLogs, eventually, freePort } from '@workauto/testing';
import { createLogger } from '@workauto/logger';
import {
  assertError,
  assertRecord,
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

describe('agents through the gateway', () => {
  let stack: TestStack;
  let fake: FakeProvider;
  let a: TenantFixture;
  let b: TenantFixture;
  let member: string;
  let viewer: string;
  let logs: ReturnType<typeof captureLogs>;
  const call = (method: string, path: string, k: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key: k, ...(body === undefined ? {} : { body }) });

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
        providers: {
          openaiBaseUrl: fake.openaiBaseUrl,
          anthropicBaseUrl: fake.anthropicBaseUrl,
          probeTimeoutMs: 1_000,
          chatTimeoutMs: 5_000,
          chatMaxRetries: 0,
        },
        runs: { heartbeatMs: 200, pollMs: 50, schedulerPollMs: 200 },
      },
    });
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
    const invite = async (role: string) => {
      const inv = await call('POST', '/invitations', a.key, { email: `${role}-${randomUUID()}@alpha.test`, role });
      return (await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } })).body
        .api_key as string;
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
    const res = await call('GET', '/agent-blueprints', a.key);
    assert.equal(res.status, 200);
    assert.equal(res.body.has_more, false);
    assert.equal(res.body.next_cursor ?? null, null);
    for (const bp of res.body.data) {
      assertRecord(
        bp,
        { id: 'string', name: 'string', description: 'string', models: 'object', tools: 'array' },
        'blueprint',
      );
      assert.equal(typeof bp.models.openai, 'string');
      assert.equal(typeof bp.models.anthropic, 'string');
    }
    assertError(await call('GET', '/agent-blueprints?limit=0', a.key), 400);
  });

  it('GET|PUT /agent-configs: a bare array, full replace, 404 for an unknown blueprint or none yet, 400s naming fields', async () => {
    const empty = await call('GET', '/agent-configs', a.key);
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body, []);
    assertError(await call('GET', '/agent-configs/task-triage', a.key), 404, 'AGENT_CONFIG_NOT_FOUND');
    assertError(await call('GET', '/agent-configs/nope', a.key), 404, 'AGENT_BLUEPRINT_NOT_FOUND');
    const put = await call('PUT', '/agent-configs/task-triage', a.key, {
      budget_default_cents: 500,
      deadline_default_seconds: 60,
      schedule: '0 9 * * 1-5',
      guardrails: [{ type: 'max_tool_calls', value: 5 }],
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assertRecord(
      put.body,
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
    assert.equal(put.body.tenant_id, a.id);
    assert.equal(put.body.byok_status, 'unset');
    assert.equal(put.body.budget_default_cents, 500);
    assert.equal(put.body.schedule, '0 9 * * 1-5');
    for (const internal of ['byok_ciphertext', 'byok_key_version', 'key_version', 'disable_reason', 'schedule_next_at'])
      assert.ok(!(internal in put.body), internal);
    const replaced = await call('PUT', '/agent-configs/task-triage', a.key, {});
    assert.equal(replaced.status, 200);
    assert.deepEqual(replaced.body.guardrails, []);
    assert.equal(replaced.body.schedule ?? null, null);
    assert.equal(replaced.body.budget_default_cents ?? null, null);
    const listed = await call('GET', '/agent-configs', a.key);
    assert.deepEqual(
      listed.body.map((c: { agent_blueprint: string }) => c.agent_blueprint),
      ['task-triage'],
    );
    assert.equal((await call('GET', '/agent-configs/task-triage', a.key)).body.id, put.body.id);

    const bad = await call('PUT', '/agent-configs/task-triage', a.key, {
      schedule: '* * * *',
      guardrails: [{ type: 'block_pattern', pattern: '(' }],
    });
    assertError(bad, 400);
    assert.deepEqual(violations(bad), ['schedule', 'guardrails[0].pattern']);
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
    assert.deepEqual((await call('GET', '/agent-configs', b.key)).body, []);
    assertError(await call('GET', '/agent-configs/task-triage', b.key), 404);
  });

  it('POST /agent-configs/validate-key: a ProbeResult for every outcome, 200 once the body is valid', async () => {
    const good = key('sk-ant-');
    fake.probes.set(good, 'ok');
    const valid = await call('POST', '/agent-configs/validate-key', a.key, { api_key: good });
    assert.equal(valid.status, 200);
    assert.deepEqual(valid.body.status, 'valid');
    assert.equal(valid.body.category ?? null, null);
    for (const [outcome, category] of [
      [401, 'invalid_key'],
      [403, 'permission_denied'],
      [402, 'insufficient_quota'],
      [429, 'rate_limited'],
      [529, 'provider_unavailable'],
    ] as const) {
      const k = key('sk-');
      fake.probes.set(k, outcome);
      const res = await call('POST', '/agent-configs/validate-key', a.key, { api_key: k, provider: 'openai' });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'invalid');
      assert.equal(res.body.category, category);
      assert.equal(typeof res.body.message, 'string');
      assert.ok(!JSON.stringify(res.body).includes(k));
    }
    assert.deepEqual(
      violations(await call('POST', '/agent-configs/validate-key', a.key, { api_key: good, provider: 'mistral' })),
      ['provider'],
    );
    assert.deepEqual(violations(await call('POST', '/agent-configs/validate-key', a.key, {})), ['api_key']);
  });

  it('PUT|DELETE /agent-configs/{blueprint}/byok-key: 200 valid, 400 BYOK_KEY_INVALID, 503 BYOK_PROBE_UNAVAILABLE, then unset', async () => {
    const good = key('sk-');
    fake.probes.set(good, 'ok');
    const stored = await call('PUT', '/agent-configs/pipeline-review/byok-key', a.key, { api_key: good });
    assert.equal(stored.status, 200, JSON.stringify(stored.body));
    assert.equal(stored.body.byok_status, 'valid');
    assert.match(stored.body.byok_last_probed_at, /Z$/);
    const refused = key('sk-');
    fake.probes.set(refused, 401);
    const invalid = await call('PUT', '/agent-configs/pipeline-review/byok-key', a.key, { api_key: refused });
    assertError(invalid, 400, 'BYOK_KEY_INVALID');
    assert.equal(invalid.body.error.details[0].metadata.category, 'invalid_key');
    const down = key('sk-');
    fake.probes.set(down, 500);
    const unavailable = await call('PUT', '/agent-configs/pipeline-review/byok-key', a.key, { api_key: down });
    assertError(unavailable, 503, 'BYOK_PROBE_UNAVAILABLE');
    assert.equal(unavailable.body.error.details[0].metadata.category, 'provider_unavailable');
    for (const res of [invalid, unavailable])
      assert.ok(!JSON.stringify(res.body).includes(refused) && !JSON.stringify(res.body).includes(down));
    const still = await call('GET', '/agent-configs/pipeline-review', a.key);
    assert.equal(still.body.byok_status, 'valid');
    assert.equal(still.body.byok_last_probed_at, stored.body.byok_last_probed_at);
    // The breaker of the route stays closed after a 503 the service answered itself.
    const again = key('sk-');
    fake.probes.set(again, 'ok');
    assert.equal((await call('PUT', '/agent-configs/pipeline-review/byok-key', a.key, { api_key: again })).status, 200);
    const removed = await call('DELETE', '/agent-configs/pipeline-review/byok-key', a.key);
    assert.equal(removed.status, 200);
    assert.equal(removed.body.byok_status, 'unset');
    assertError(await call('DELETE', '/agent-configs/daily-briefing/byok-key', a.key), 404);
    assertError(await call('DELETE', '/agent-configs/pipeline-review/byok-key', b.key), 404);
  });

  it('audits config and key changes without the key', async () => {
    const k = key('sk-');
    fake.probes.set(k, 'ok');
    await call('PUT', '/agent-configs/daily-briefing/byok-key', a.key, { api_key: k });
    await eventually('the audit entry', async () => {
      const log = await call('GET', '/audit-log?resource_type=agent_config', a.key);
      return log.body.data?.some((e: { action: string }) => e.action === 'agent_config.byok_key_set');
    });
    const log = await call('GET', '/audit-log?resource_type=agent_config', a.key);
    assert.ok(!JSON.stringify(log.body).includes(k));
  });

  it('POST|GET /agents/{blueprint}/runs and cancel: a run creates a task as its agent (audited so), pages by RFC 3339 cursor', async () => {
    const k = key('sk-');
    fake.script(k, [
      {
        tools: [{ name: 'create_task', arguments: { title: 'Call ACME back' } }],
        usage: { input: 10_000, output: 1_000 },
      },
      { text: 'One task created.', usage: { input: 10_000, output: 1_000 } },
    ]);
    assert.equal(
      (await call('PUT', '/agent-configs/task-triage/byok-key', a.key, { api_key: k, provider: 'openai' })).status,
      200,
    );
    const created = await stack.api('POST', '/api/v1/agents/task-triage/runs', {
      key: a.key,
      body: { input: { note: 'triage' } },
      headers: { 'idempotency-key': 'run-1' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assertRecord(
      created.body,
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
    assert.equal(created.body.status, 'queued');
    for (const internal of ['worker_id', 'lease_expires_at', 'last_heartbeat_at', 'claims', 'disable_reason'])
      assert.ok(!(internal in created.body), internal);
    const replay = await stack.api('POST', '/api/v1/agents/task-triage/runs', {
      key: a.key,
      body: { input: { note: 'triage' } },
      headers: { 'idempotency-key': 'run-1' },
    });
    assert.equal(replay.body.id, created.body.id, 'an Idempotency-Key replays the first run, no second one');
    let run: any;
    await eventually(
      'the run succeeds',
      async () => {
        run = (await call('GET', `/agents/task-triage/runs/${created.body.id}`, a.key)).body;
        return run.status === 'succeeded' || run.status === 'failed';
      },
      20_000,
      50,
    );
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.deepEqual(run.output, {
      text: 'One task created.',
      steps: 2,
      tool_calls: [{ name: 'create_task', is_error: false }],
    });
    assert.equal(run.cost_usd_cents, 2);
    assert.equal(run.failure_category ?? null, null);
    const steps = await call('GET', `/agents/task-triage/runs/${run.id}/steps`, a.key);
    assert.equal(steps.status, 200, JSON.stringify(steps.body));
    assert.deepEqual(
      steps.body.data.map((x: { index: number; type: string; tool_name?: string }) => [
        x.index,
        x.type,
        x.tool_name ?? null,
      ]),
      [
        [0, 'model_call', null],
        [1, 'tool_call', 'create_task'],
        [2, 'model_call', null],
      ],
    );
    assertRecord(
      steps.body.data[0],
      { index: 'integer', type: 'string', started_at: 'date-time', ended_at: 'date-time' },
      'step',
    );
    assert.deepEqual(
      [steps.body.data[0].input_tokens, steps.body.data[0].output_tokens, steps.body.data[0].cost_usd_cents],
      [10_000, 1_000, 0.56],
    );
    assert.deepEqual(steps.body.data[1].arguments, { title: 'Call ACME back' });
    assert.equal(steps.body.data[1].is_error, false);
    assert.equal(JSON.parse(steps.body.data[1].result).title, 'Call ACME back');
    assert.equal(steps.body.data[2].result, 'One task created.');
    assert.equal((await call('GET', `/agents/task-triage/runs/${run.id}/steps`, member)).status, 200, 'read suffices');
    assertError(await call('GET', `/agents/task-triage/runs/${run.id}/steps`, viewer), 403);
    assertError(await call('GET', `/agents/task-triage/runs/${run.id}/steps`, b.key), 404, 'AGENT_RUN_NOT_FOUND');
    const tasks = await call('GET', '/tasks', a.key);
    assert.deepEqual(
      tasks.body.data.map((x: { title: string }) => x.title),
      ['Call ACME back'],
    );
    await eventually("the audit entry of the agent's task", async () => {
      const log = await call('GET', '/audit-log?action=task.created', a.key);
      return log.body.data?.length === 1;
    });
    const entry = (await call('GET', '/audit-log?action=task.created', a.key)).body.data[0];
    assert.equal(entry.actor_type, 'agent');
    assert.equal(entry.actor_id, run.id);
    assert.equal(entry.resource_id, tasks.body.data[0].id);

    const later = new Date(Date.now() + 3_600_000).toISOString();
    const queued = (
      await call('POST', '/agents/task-triage/runs', a.key, {
        input: 'later',
        run_at: later,
        budget_usd_cents: 50,
        deadline_seconds: 30,
      })
    ).body;
    assert.equal(queued.budget_usd_cents, 50);
    const cancelled = await call('POST', `/agents/task-triage/runs/${queued.id}/cancel`, a.key);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, 'cancelled');
    assert.equal((await call('POST', `/agents/task-triage/runs/${queued.id}/cancel`, a.key)).status, 200);
    assertError(await call('POST', `/agents/task-triage/runs/${run.id}/cancel`, a.key), 409, 'AGENT_RUN_FINISHED');
    const member409 = await call('POST', `/agents/task-triage/runs/${run.id}/cancel`, b.key);
    assertError(member409, 404);

    const page1 = await call('GET', '/agents/task-triage/runs?limit=1', a.key);
    assert.equal(page1.status, 200);
    assert.deepEqual(
      page1.body.data.map((r: { id: string }) => r.id),
      [queued.id],
    );
    assert.equal(page1.body.has_more, true);
    assert.equal(page1.body.next_cursor, page1.body.data[0].created_at);
    const page2 = await call(
      'GET',
      `/agents/task-triage/runs?limit=1&cursor=${encodeURIComponent(page1.body.next_cursor)}`,
      a.key,
    );
    assert.deepEqual(
      page2.body.data.map((r: { id: string }) => r.id),
      [run.id],
    );
    assert.equal(page2.body.has_more, false);
    assert.equal(page2.body.next_cursor ?? null, null);
    const succeeded = await call('GET', '/agents/task-triage/runs?status=succeeded', a.key);
    assert.deepEqual(
      succeeded.body.data.map((r: { id: string }) => r.id),
      [run.id],
    );
    assert.deepEqual(violations(await call('GET', '/agents/task-triage/runs?status=done', a.key)), ['status']);
    assert.deepEqual(violations(await call('GET', '/agents/task-triage/runs?cursor=abc', a.key)), ['cursor']);
    assertError(await call('GET', '/agents/nope/runs', a.key), 404, 'AGENT_BLUEPRINT_NOT_FOUND');
    assertError(await call('GET', '/agents/task-triage/runs/not-a-uuid', a.key), 400);
    assertError(await call('GET', `/agents/task-triage/runs/${run.id}`, b.key), 404);
    assert.deepEqual((await call('GET', '/agents/task-triage/runs', b.key)).body.data, []);
    assertError(await call('POST', '/agents/task-triage/runs', a.key, { deadline_seconds: 0 }), 400);
  });

  it("calls an app's tool through the apps service (the MCP server receives it) beside a built-in tool; a dead app fails the run app_unavailable", async () => {
    const secret = `mcp-secret-${randomUUID()}`;
    const mcp = await startMcpServer({
      transport: 'streamable',
      auth: { header: 'authorization', value: `Bearer ${secret}` },
      tools: [{ name: 'lookup', description: 'Finds a customer' }],
    });
    try {
      assert.equal(
        (
          await call('POST', '/apps', a.key, {
            slug: 'crm-app',
            display_name: 'CRM app',
            mcp_server_url: mcp.url,
            auth: { type: 'bearer', secret },
          })
        ).status,
        201,
      );
      assert.equal((await call('POST', '/apps/crm-app/probe', a.key, {})).body.status, 'healthy');
      assert.equal((await call('PATCH', '/apps/crm-app', a.key, { enabled_tools: ['lookup'] })).status, 200);
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
      assert.equal(
        (await call('PUT', '/agent-configs/task-triage/byok-key', a.key, { api_key: k, provider: 'openai' })).status,
        200,
      );
      const created = await call('POST', '/agents/task-triage/runs', a.key, { input: 'find acme' });
      let run: any;
      await eventually(
        'the run ends',
        async () => {
          run = (await call('GET', `/agents/task-triage/runs/${created.body.id}`, a.key)).body;
          return run.status === 'succeeded' || run.status === 'failed';
        },
        20_000,
        50,
      );
      assert.equal(run.status, 'succeeded', JSON.stringify(run));
      assert.deepEqual(run.output.tool_calls, [
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
      await eventually("the audit log has the agent's app tool call", async () => {
        const log = await call('GET', '/audit-log?resource_type=task', a.key);
        return log.body.data?.some(
          (e: { actor_type: string; actor_id: string }) => e.actor_type === 'agent' && e.actor_id === run.id,
        );
      });
      let toolCalled: any;
      await eventually('the audit entry of the app tool call, by the run', async () => {
        const log = await call('GET', '/audit-log?action=app.tool_called', a.key);
        toolCalled = log.body.data?.find((e: { actor_id: string }) => e.actor_id === run.id);
        return toolCalled !== undefined;
      });
      assert.equal(toolCalled.actor_type, 'agent');
      assert.equal(toolCalled.resource_type, 'app');
      assert.deepEqual(
        [toolCalled.metadata.app_slug, toolCalled.metadata.tool, toolCalled.metadata.outcome],
        ['crm-app', 'lookup', 'ok'],
      );
      assert.ok(!JSON.stringify(toolCalled).includes('acme'), 'never the arguments');

      await mcp.close();
      const k2 = key('sk-');
      fake.script(k2, [{ tools: [{ name: 'crm-app__lookup', arguments: {} }] }, { text: 'never' }]);
      assert.equal(
        (await call('PUT', '/agent-configs/task-triage/byok-key', a.key, { api_key: k2, provider: 'openai' })).status,
        200,
      );
      const second2 = await call('POST', '/agents/task-triage/runs', a.key, { input: 'again' });
      await eventually(
        'the run ends',
        async () => {
          run = (await call('GET', `/agents/task-triage/runs/${second2.body.id}`, a.key)).body;
          return run.status === 'succeeded' || run.status === 'failed';
        },
        30_000,
        50,
      );
      assert.equal(run.status, 'failed', JSON.stringify(run));
      assert.equal(run.failure_category, 'app_unavailable', run.failure_detail);
      assert.match(run.failure_detail, /crm-app__lookup/);
      assert.ok(!run.failure_detail.includes(secret));
    } finally {
      await mcp.close().catch(() => undefined);
    }
  });

  it('runs with an OAuth app like any other app; a run whose app needs authorization fails app_needs_authorization', async () => {
    const server = await OAuthMcpServer.start();
    const runToEnd = async (input: string) => {
      const created = await call('POST', '/agents/task-triage/runs', a.key, { input });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      let run: any;
      await eventually(
        'the run ends',
        async () => {
          run = (await call('GET', `/agents/task-triage/runs/${created.body.id}`, a.key)).body;
          return run.status === 'succeeded' || run.status === 'failed';
        },
        20_000,
        50,
      );
      return run;
    };
    try {
      const created = await call('POST', '/apps', a.key, {
        slug: 'oauth-app',
        display_name: 'OAuth app',
        mcp_server_url: server.mcpUrl,
        auth: { type: 'oauth2' },
      });
      assert.deepEqual([created.status, created.body.status], [201, 'needs_authorization']);
      // The admin's authorize, the user's consent, the callback through the gateway (no credential).
      const started = await call('POST', '/apps/oauth-app/oauth/authorize', a.key, {
        return_to: 'https://app.example.com/apps',
      });
      assert.equal(started.status, 200, JSON.stringify(started.body));
      const callbackUrl = await consent(started.body.authorization_url);
      assert.equal(callbackUrl.origin + callbackUrl.pathname, `${stack.url}/api/v1/apps/oauth/callback`);
      const callback = await fetch(callbackUrl, { redirect: 'manual' });
      assert.equal(callback.status, 302);
      assert.equal(callback.headers.get('location'), 'https://app.example.com/apps?status=connected&app=oauth-app');
      assert.equal((await fetch(callbackUrl, { redirect: 'manual' })).status, 400, 'the state is single-use');
      await eventually(
        'the connected app is probed healthy',
        async () => (await call('GET', '/apps/oauth-app', a.key)).body.status === 'healthy',
      );
      assert.equal((await call('PATCH', '/apps/oauth-app', a.key, { enabled_tools: ['echo'] })).status, 200);

      const k = key('sk-');
      fake.script(k, [
        { tools: [{ name: 'oauth-app__echo', arguments: { text: 'from the run' } }] },
        { text: 'Done.' },
      ]);
      assert.equal(
        (await call('PUT', '/agent-configs/task-triage/byok-key', a.key, { api_key: k, provider: 'openai' })).status,
        200,
      );
      const ok = await runToEnd('echo something');
      assert.equal(ok.status, 'succeeded', JSON.stringify(ok));
      assert.deepEqual(ok.output.tool_calls, [{ name: 'oauth-app__echo', is_error: false }]);
      assert.deepEqual(
        (await server.stats()).toolCalls.map((c) => c.name),
        ['echo'],
      );

      // The authorization server drops the tokens it gave: the next run's call cannot be refreshed.
      await server.control({ expireAccessTokens: true, revokeRefreshTokens: true });
      const k2 = key('sk-');
      fake.script(k2, [{ tools: [{ name: 'oauth-app__echo', arguments: { text: 'again' } }] }, { text: 'never' }]);
      assert.equal(
        (await call('PUT', '/agent-configs/task-triage/byok-key', a.key, { api_key: k2, provider: 'openai' })).status,
        200,
      );
      const refused = await runToEnd('echo again');
      assert.equal(refused.status, 'failed', JSON.stringify(refused));
      assert.equal(refused.failure_category, 'app_needs_authorization', refused.failure_detail);
      assert.match(refused.failure_detail, /POST \/api\/v1\/apps\/oauth-app\/oauth\/authorize/);
      assert.equal((await call('GET', '/apps/oauth-app', a.key)).body.status, 'needs_authorization');
      await eventually('the audit log has app.authorization_required', async () => {
        const log = await call('GET', '/audit-log?action=app.authorization_required', a.key);
        return log.body.data?.some((e: { resource_id: string }) => e.resource_id === created.body.id);
      });
      const issued = (await server.stats()).issued;
      assert.ok(issued.length > 0);
      for (const secret of issued) assert.equal(logs.text().includes(secret), false, `a log line holds ${secret}`);
    } finally {
      await server.stop();
    }
  });

  it("runs a model of the tenant's choosing on its own OpenAI-compatible server (a process of its own) through the API", async () => {
    const server = await FakeProviderProcess.start({ only: 'openai' });
    try {
      const k = key('sk-');
      await server.probe(k, 'ok');
      const noKey = await call('PUT', '/agent-configs/pipeline-review', b.key, { base_url: server.openaiBaseUrl });
      assertError(noKey, 400);
      assert.deepEqual(violations(noKey), ['base_url']);
      const probed = await call('POST', '/agent-configs/validate-key', b.key, {
        api_key: k,
        provider: 'openai',
        base_url: server.openaiBaseUrl,
      });
      assert.deepEqual([probed.status, probed.body.status], [200, 'valid']);
      assert.deepEqual(
        violations(
          await call('POST', '/agent-configs/validate-key', b.key, { api_key: k, base_url: 'https://x.test/v 1' }),
        ),
        ['base_url'],
      );
      const stored = await call('PUT', '/agent-configs/pipeline-review/byok-key', b.key, {
        api_key: k,
        provider: 'openai',
        base_url: server.openaiBaseUrl,
      });
      assert.equal(stored.status, 200, JSON.stringify(stored.body));
      const config = await call('PUT', '/agent-configs/pipeline-review', b.key, {
        model: 'qwen2.5:7b',
        base_url: server.openaiBaseUrl,
        input_price_cents_per_mtok: 0,
        output_price_cents_per_mtok: 0,
      });
      assert.equal(config.status, 200, JSON.stringify(config.body));
      assert.deepEqual(
        [config.body.model, config.body.base_url, config.body.input_price_cents_per_mtok, config.body.provider ?? null],
        ['qwen2.5:7b', server.openaiBaseUrl, 0, null],
      );
      await server.script(k, [{ text: 'Reviewed on our own hardware.' }]);
      const created = await call('POST', '/agents/pipeline-review/runs', b.key, { input: 'review' });
      let run: any;
      await eventually(
        'the run ends',
        async () => {
          run = (await call('GET', `/agents/pipeline-review/runs/${created.body.id}`, b.key)).body;
          return run.status === 'succeeded' || run.status === 'failed';
        },
        20_000,
        50,
      );
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
    const cal = await call('POST', '/calendars', a.key, { name: 'Team' });
    assert.equal(cal.status, 201, JSON.stringify(cal.body));
    const start = new Date(Date.now() + 3_600_000);
    const event = await call('POST', '/events', a.key, {
      calendar_id: cal.body.id,
      title: 'Board meeting',
      start_at: start.toISOString(),
      end_at: new Date(start.getTime() + 3_600_000).toISOString(),
    });
    assert.equal(event.status, 201, JSON.stringify(event.body));
    const k = key('sk-');
    fake.script(k, [
      { tools: [{ name: 'list_calendar_events', arguments: {} }] },
      { tools: [{ name: 'create_note', arguments: { title: 'Briefing', body: 'Board meeting in an hour.' } }] },
      { text: 'Briefing written.' },
    ]);
    assert.equal(
      (await call('PUT', '/agent-configs/daily-briefing/byok-key', a.key, { api_key: k, provider: 'openai' })).status,
      200,
    );
    const created = await call('POST', '/agents/daily-briefing/runs', a.key, {});
    let run: any;
    await eventually(
      'the run ends',
      async () => {
        run = (await call('GET', `/agents/daily-briefing/runs/${created.body.id}`, a.key)).body;
        return run.status === 'succeeded' || run.status === 'failed';
      },
      20_000,
      50,
    );
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.deepEqual(run.output.tool_calls, [
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
    const notes = await call('GET', '/notes?q=Board', a.key);
    assert.deepEqual(
      notes.body.data.map((n: { title: string }) => n.title),
      ['Briefing'],
    );
  });

  it('applies the role matrix: reads need read, runs write, configs and keys admin; viewers have none', async () => {
    const k = key('sk-');
    fake.probes.set(k, 'ok');
    assert.equal((await call('GET', '/agent-configs', member)).status, 200);
    assert.equal((await call('GET', '/agent-blueprints', member)).status, 200);
    assertError(await call('PUT', '/agent-configs/task-triage', member, {}), 403);
    assertError(await call('POST', '/agent-configs/validate-key', member, { api_key: k }), 403);
    assertError(await call('PUT', '/agent-configs/task-triage/byok-key', member, { api_key: k }), 403);
    assertError(await call('DELETE', '/agent-configs/task-triage/byok-key', member), 403);
    assertError(await call('POST', '/agents/task-triage/runs', member, { input: 'x' }), 403);
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const run = (await call('POST', '/agents/task-triage/runs', a.key, { input: 'roles', run_at: later })).body;
    assert.equal((await call('GET', '/agents/task-triage/runs', member)).status, 200);
    assert.equal((await call('GET', `/agents/task-triage/runs/${run.id}`, member)).status, 200);
    assertError(await call('POST', `/agents/task-triage/runs/${run.id}/cancel`, member), 403);
    assertError(await call('GET', `/agents/task-triage/runs/${run.id}`, viewer), 403);
    assertError(await call('GET', '/agent-configs/task-triage', viewer), 403);
    assertError(await call('GET', '/agent-configs', viewer), 403);
    assertError(await call('GET', '/agent-blueprints', viewer), 403);
    assertError(await call('GET', '/agents/task-triage/runs', viewer), 403);
    assertError(await stack.api('GET', '/api/v1/agent-configs'), 401);
  });

  it("starts a run only for a member who may act in every domain of the blueprint's tools: crm none is a 403 naming crm, crm read a 201", async () => {
    const inv = await call('POST', '/invitations', a.key, {
      email: `runner-${randomUUID()}@alpha.test`,
      role: 'member',
    });
    const claimed = (await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } })).body;
    const policies = (crm: string) =>
      call('PUT', `/members/${claimed.member.id}/access-policies`, a.key, {
        policies: [
          { domain: 'agents', access_level: 'write' },
          { domain: 'crm', access_level: crm },
        ],
      });
    assert.equal((await policies('none')).status, 200);
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const refused = await call('POST', '/agents/pipeline-review/runs', claimed.api_key, { input: 'x', run_at: later });
    assertError(refused, 403, 'ACCESS_DENIED');
    assert.deepEqual(refused.body.error.details[0].metadata, {
      domain: 'crm',
      required_level: 'read',
      actual_level: 'none',
    });
    assert.match(refused.body.error.message, /crm/);
    assert.deepEqual((await call('GET', '/agents/pipeline-review/runs', a.key)).body.data, [], 'no run was made');
    assert.equal((await policies('read')).status, 200);
    const created = await call('POST', '/agents/pipeline-review/runs', claimed.api_key, { input: 'x', run_at: later });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'queued');
    assert.equal((await call('POST', `/agents/pipeline-review/runs/${created.body.id}/cancel`, a.key)).status, 200);
  });

  it('never writes a provider key to any log line of the gateway or a service, at debug level', () => {
    const text = logs.text();
    assert.ok(text.includes('"level":"debug"'), 'debug lines were captured');
    assert.ok(sentKeys.length >= 10);
    for (const k of sentKeys) assert.ok(!text.includes(k), 'a provider key reached the logs');
  });
});
