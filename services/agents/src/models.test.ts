/**
 * A config's own provider, model, server and prices, over real gRPC and PostgreSQL: runs against an
 * OpenAI-compatible and an Anthropic-compatible server that each run as a process of their own on
 * their own port (as a tenant's vLLM, Ollama or OpenRouter would), and the egress policy refusing
 * base URLs when written and when called.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { EgressPolicy } from '@workauto/egress';
import {
  AgentRunStatus,
  FailureCategory,
  ProbeCategory,
  ProbeStatus,
  Provider,
} from '@workauto/protos/workauto/agents/v1/agents.js';
import { S, failure, newKey, runUntilDone, startAgents, startRunStack, tenant, withAccess } from './test-support.js';
import { FakeProviderProcess } from './testing/fake-provider.js';

type Stack = Awaited<ReturnType<typeof startRunStack>>;

const fields = (f: { fieldViolations: { field: string }[] }) => f.fieldViolations.map((v) => v.field);

describe("a config's provider, model and base_url against tenants' own servers", () => {
  let stack: Stack;
  let openaiServer: FakeProviderProcess;
  let anthropicServer: FakeProviderProcess;
  // A self-hosted deployment whose operator allows private addresses (EGRESS_ALLOW_PRIVATE=true).
  const egress = new EgressPolicy({ allowPrivate: true });
  const PLATFORM_OPENAI_KEY = newKey('openai');

  before(async () => {
    // Two processes of their own: an OpenAI-compatible server under a path (as OpenRouter's
    // https://openrouter.ai/api/v1) and an Anthropic-compatible one.
    [openaiServer, anthropicServer] = await Promise.all([
      FakeProviderProcess.start({ only: 'openai', prefix: '/compat/api' }),
      FakeProviderProcess.start({ only: 'anthropic' }),
    ]);
    stack = await startRunStack({ config: { egress, platformKeys: { openai: PLATFORM_OPENAI_KEY } } });
  });
  after(async () => {
    await stack?.stop();
    await Promise.all([openaiServer?.stop(), anthropicServer?.stop()]);
    await egress.close();
  });

  it("runs an unknown model on a tenant's OpenAI-compatible server with the key's base_url, priced by the config", async () => {
    const t = tenant();
    const k = newKey('openai');
    await openaiServer.probe(k, 'ok');
    const checked = await stack.client.call(
      S.validateKey,
      { api_key: k, provider: Provider.PROVIDER_OPENAI, base_url: openaiServer.openaiBaseUrl },
      t.call,
    );
    assert.equal(checked.status, ProbeStatus.PROBE_STATUS_VALID, checked.message);
    const config = await stack.client.call(
      S.putByokKey,
      {
        blueprint: 'task-triage',
        api_key: k,
        provider: Provider.PROVIDER_OPENAI,
        base_url: openaiServer.openaiBaseUrl,
      },
      t.call,
    );
    assert.equal(config.base_url, openaiServer.openaiBaseUrl);
    const probes = (await openaiServer.requests()).filter((r) => r.headers.authorization === `Bearer ${k}`);
    assert.deepEqual(
      probes.map((r) => `${r.method} ${r.path}`),
      ['GET /compat/api/v1/models', 'GET /compat/api/v1/models'],
      'validate-key and byok-key probed the base_url',
    );

    // A model the price table does not know needs its price (0 for a model one hosts oneself).
    const noPrice = await failure(
      stack.client.call(
        S.putAgentConfig,
        { blueprint: 'task-triage', model: 'llama3.1:8b', base_url: openaiServer.openaiBaseUrl },
        t.call,
      ),
    );
    assert.equal(noPrice.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(fields(noPrice), ['input_price_cents_per_mtok']);
    assert.match(noPrice.fieldViolations[0]!.description, /llama3\.1:8b.*0 and 0/);
    // Full replace: base_url must come back with the PUT, the key's server and no other.
    const omitted = await failure(
      stack.client.call(
        S.putAgentConfig,
        {
          blueprint: 'task-triage',
          model: 'llama3.1:8b',
          input_price_cents_per_mtok: 5,
          output_price_cents_per_mtok: 5,
        },
        t.call,
      ),
    );
    assert.deepEqual(fields(omitted), ['base_url']);
    assert.match(omitted.fieldViolations[0]!.description, /must be http:\/\/127\.0\.0\.1:\d+\/compat\/api\/v1/);
    const moved = await failure(
      stack.client.call(
        S.putAgentConfig,
        { blueprint: 'task-triage', base_url: anthropicServer.openaiBaseUrl },
        t.call,
      ),
    );
    assert.deepEqual(fields(moved), ['base_url']);
    assert.match(moved.fieldViolations[0]!.description, /byok-key/);

    const put = await stack.client.call(
      S.putAgentConfig,
      {
        blueprint: 'task-triage',
        model: 'llama3.1:8b',
        base_url: openaiServer.openaiBaseUrl,
        input_price_cents_per_mtok: 10,
        output_price_cents_per_mtok: 30.5,
      },
      t.call,
    );
    assert.equal(put.model, 'llama3.1:8b');
    assert.equal(put.provider, undefined, 'provider unset: the key decides');
    assert.equal(put.input_price_cents_per_mtok, 10);
    assert.equal(put.output_price_cents_per_mtok, 30.5);

    await openaiServer.script(k, [
      { tools: [{ name: 'list_tasks', arguments: {} }], usage: { input: 100_000, output: 20_000 } },
      { text: 'Nothing is overdue.', usage: { input: 100_000, output: 20_000 } },
    ]);
    const platformBefore = stack.fake.requests.length;
    const run = await runUntilDone(stack.client, t, 'task-triage');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    const chats = await openaiServer.chats(k);
    assert.deepEqual(
      chats.map((c) => [c.path, JSON.parse(c.body).model]),
      [
        ['/compat/api/v1/chat/completions', 'llama3.1:8b'],
        ['/compat/api/v1/chat/completions', 'llama3.1:8b'],
      ],
      "the tenant's server got both calls, with the config's model",
    );
    assert.equal(stack.fake.requests.length, platformBefore, "the platform's provider got nothing");
    // 2 × (100,000 × 10 + 20,000 × 30.5) millionths of a cent = 3.22 cents, shown rounded up.
    assert.equal(run.cost_usd_cents, 4);
    assert.equal(run.platform_fee_cents, 0);

    // A budget counts against the config's price: 1 cent is passed by the first call (1.61 ¢, 2 ¢ shown).
    await openaiServer.script(k, [
      { tools: [{ name: 'list_tasks', arguments: {} }], usage: { input: 100_000, output: 20_000 } },
      { text: 'never reached', usage: { input: 100_000, output: 20_000 } },
    ]);
    const capped = await runUntilDone(stack.client, t, 'task-triage', { budget_usd_cents: 1 });
    assert.equal(capped.failure_category, FailureCategory.FAILURE_CATEGORY_BUDGET_EXCEEDED, capped.failure_detail);
    assert.equal((await openaiServer.chats(k)).length, 3, 'no provider call after the budget was passed');

    // Callers below admin on agents see the server reduced to scheme, host and port.
    const viewer = await stack.client.call(
      S.getAgentConfig,
      { blueprint: 'task-triage' },
      withAccess(t, { agents: 'read' }),
    );
    assert.equal(viewer.base_url, `${new URL(openaiServer.url).origin}/…`);

    // The key and its server go together: removing the key removes base_url.
    const removed = await stack.client.call(S.deleteByokKey, { blueprint: 'task-triage' }, t.call);
    assert.equal(removed.base_url, undefined);
    assert.equal(removed.model, 'llama3.1:8b');
    const orphan = await runUntilDone(stack.client, t, 'task-triage');
    assert.equal(orphan.failure_category, FailureCategory.FAILURE_CATEGORY_PROVIDER_AUTH);
    assert.match(orphan.failure_detail!, /platform's key runs only the models of its price table/);
  });

  it('fails a run whose server answers with a redirect by naming the redirect, never as a fault on our side', async () => {
    // A tenant's server that moved: it answers every call with 302 to its new address (never followed).
    const moved = createServer((req, res) => {
      res.writeHead(302, { location: `${openaiServer.openaiBaseUrl}${req.url ?? ''}` }).end();
    });
    await new Promise<void>((resolve) => moved.listen(0, '127.0.0.1', resolve));
    try {
      const movedUrl = `http://127.0.0.1:${(moved.address() as AddressInfo).port}/v1`;
      const t = tenant();
      const k = newKey('openai');
      await openaiServer.probe(k, 'ok');
      const probe = await stack.client.call(
        S.validateKey,
        { api_key: k, provider: Provider.PROVIDER_OPENAI, base_url: movedUrl },
        t.call,
      );
      assert.match(probe.message!, /the server answered 302; use the final URL/);
      await stack.client.call(
        S.putByokKey,
        {
          blueprint: 'task-triage',
          api_key: k,
          provider: Provider.PROVIDER_OPENAI,
          base_url: openaiServer.openaiBaseUrl,
        },
        t.call,
      );
      await stack.db.query(`UPDATE agent_configs SET base_url = $3 WHERE tenant_id = $1 AND agent_blueprint = $2`, [
        t.id,
        'task-triage',
        movedUrl,
      ]);
      const run = await runUntilDone(stack.client, t, 'task-triage');
      assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
      assert.equal(run.failure_category, FailureCategory.FAILURE_CATEGORY_PROVIDER_UNAVAILABLE);
      assert.match(run.failure_detail!, /the server answered 302; use the final URL/);
      assert.doesNotMatch(run.failure_detail!, /fault on our side/);
    } finally {
      moved.close();
    }
  });

  it("runs a non-default model on a tenant's Anthropic-compatible server (its own process): the server sees that model", async () => {
    const t = tenant();
    const k = newKey('anthropic');
    await anthropicServer.probe(k, 'ok');
    await stack.client.call(
      S.putByokKey,
      { blueprint: 'pipeline-review', api_key: k, provider: 0, base_url: anthropicServer.anthropicBaseUrl },
      t.call,
    );
    await stack.client.call(
      S.putAgentConfig,
      {
        blueprint: 'pipeline-review',
        provider: Provider.PROVIDER_ANTHROPIC,
        model: 'claude-local-1',
        base_url: anthropicServer.anthropicBaseUrl,
        input_price_cents_per_mtok: 200,
        output_price_cents_per_mtok: 1_000,
      },
      t.call,
    );
    await anthropicServer.script(k, [{ text: 'Pipeline reviewed.', usage: { input: 1_000_000, output: 100_000 } }]);
    const run = await runUntilDone(stack.client, t, 'pipeline-review');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    const [chat] = await anthropicServer.chats(k);
    assert.equal(chat!.path, '/v1/messages');
    assert.equal(JSON.parse(chat!.body).model, 'claude-local-1');
    assert.equal(chat!.headers.authorization, `Bearer ${k}`);
    // 1,000,000 × 200 + 100,000 × 1,000 millionths of a cent.
    assert.equal(run.cost_usd_cents, 300);
    assert.equal((await openaiServer.chats(k)).length, 0, 'the other server got nothing');
  });

  it("chooses a model of the platform's price table for runs on the platform's key", async () => {
    const t = tenant();
    await stack.client.call(
      S.putAgentConfig,
      { blueprint: 'daily-briefing', provider: Provider.PROVIDER_OPENAI, model: 'gpt-4.1' },
      t.call,
    );
    stack.fake.script(PLATFORM_OPENAI_KEY, [{ text: 'Briefing.', usage: { input: 1_000_000, output: 0 } }]);
    const run = await runUntilDone(stack.client, t, 'daily-briefing');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    assert.equal(JSON.parse(stack.fake.chats(PLATFORM_OPENAI_KEY).at(-1)!.body).model, 'gpt-4.1');
    assert.equal(run.cost_usd_cents, 200, "gpt-4.1's table price");
  });

  it('refuses model fields that cannot run, each a 400 naming the field and saying what to do', async () => {
    const t = tenant();
    const put = (body: Record<string, unknown>) =>
      failure(stack.client.call(S.putAgentConfig, { blueprint: 'task-triage', ...body }, t.call));
    const noKey = await put({ base_url: 'https://llm.example.com/v1' });
    assert.deepEqual(fields(noKey), ['base_url']);
    assert.match(noKey.fieldViolations[0]!.description, /no key.*byok-key/);
    const unknown = await put({ model: 'mistral-large' });
    assert.deepEqual(fields(unknown), ['model']);
    assert.match(unknown.fieldViolations[0]!.description, /price table.*own key/);
    assert.deepEqual(fields(await put({ model: 'has space' })), ['model']);
    assert.deepEqual(fields(await put({ model: 'x'.repeat(129) })), ['model']);
    assert.deepEqual(fields(await put({ model: 'claude-haiku-4-5', provider: Provider.PROVIDER_OPENAI })), ['model']);
    assert.deepEqual(fields(await put({ input_price_cents_per_mtok: 5 })), ['output_price_cents_per_mtok']);
    assert.deepEqual(fields(await put({ input_price_cents_per_mtok: -1, output_price_cents_per_mtok: 1e9 })), [
      'input_price_cents_per_mtok',
      'output_price_cents_per_mtok',
    ]);
    assert.deepEqual(fields(await put({ provider: 7 })), ['provider']);
    // With an OpenAI key stored, the config cannot say anthropic (nor the next key disagree with the config).
    const k = newKey('openai');
    stack.fake.probes.set(k, 'ok');
    await stack.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0 }, t.call);
    const other = await put({ provider: Provider.PROVIDER_ANTHROPIC });
    assert.deepEqual(fields(other), ['provider']);
    assert.match(other.fieldViolations[0]!.description, /openai key/);
    await stack.client.call(S.putAgentConfig, { blueprint: 'task-triage', provider: Provider.PROVIDER_OPENAI }, t.call);
    const ant = newKey('anthropic');
    stack.fake.probes.set(ant, 'ok');
    const probesBefore = stack.fake.requests.length;
    const mismatch = await failure(
      stack.client.call(
        S.putByokKey,
        { blueprint: 'task-triage', api_key: ant, provider: Provider.PROVIDER_ANTHROPIC },
        t.call,
      ),
    );
    assert.deepEqual(fields(mismatch), ['provider']);
    assert.equal(stack.fake.requests.length, probesBefore, 'refused before any probe');
  });
});

describe("the egress policy on a config's base_url", () => {
  let agents: Awaited<ReturnType<typeof startAgents>>;
  let server: FakeProviderProcess;
  // A deployment with the default policy (https to public addresses only), whose resolver maps a
  // name to loopback: a name that passes when written and resolves to an internal address.
  const egress = new EgressPolicy({
    resolve: async (host) =>
      host === 'llm.internal.test' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '10.9.8.7', family: 4 }],
  });
  before(async () => {
    server = await FakeProviderProcess.start({ only: 'openai' });
    agents = await startAgents({ config: { egress } });
  });
  after(async () => {
    await agents?.stop();
    await server?.stop();
    await egress.close();
  });

  it('refuses a base_url the policy never allows when it is written: 400 naming base_url, before any probe', async () => {
    const t = tenant();
    const k = newKey('openai');
    const cases: [string, RegExp][] = [
      [server.openaiBaseUrl, /https/],
      ['https://127.0.0.1/v1', /loopback/],
      ['https://10.1.2.3/v1', /private/],
      ['https://[::1]/v1', /loopback/],
      ['https://llm.example.com/v 1', /whitespace/],
      ['https://llm.example.com/v1\u0007', /control/],
      ['ftp://llm.example.com/v1', /https/],
      ['https://user:pass@llm.example.com/v1', /user name or password/],
      ['not a url', /whitespace|absolute/],
    ];
    for (const [base_url, why] of cases) {
      for (const call of [
        () => agents.client.call(S.validateKey, { api_key: k, provider: 0, base_url }, t.call),
        () => agents.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0, base_url }, t.call),
      ]) {
        const f = await failure(call());
        assert.equal(f.code, grpc.status.INVALID_ARGUMENT, base_url);
        assert.deepEqual(fields(f), ['base_url'], base_url);
        assert.match(f.fieldViolations[0]!.description, why, base_url);
        assert.ok(!f.message.includes(k), 'the key is never echoed');
      }
    }
    assert.deepEqual(await server.requests(), [], 'nothing reached the server');
  });

  it('refuses at connect a name that resolves to an internal address: the probe and the run say which rule, never the address', async () => {
    const t = tenant();
    const k = newKey('openai');
    await server.probe(k, 'ok');
    const internal = `https://llm.internal.test:${server.port}/v1`;
    const probe = await agents.client.call(
      S.validateKey,
      { api_key: k, provider: Provider.PROVIDER_OPENAI, base_url: internal },
      t.call,
    );
    assert.equal(probe.status, ProbeStatus.PROBE_STATUS_INVALID);
    assert.equal(probe.category, ProbeCategory.PROBE_CATEGORY_NETWORK_ERROR);
    assert.match(
      probe.message!,
      /llm\.internal\.test resolves to a loopback address.*egress policy.*EGRESS_ALLOWED_CIDRS/,
    );
    assert.ok(!probe.message!.includes('127.0.0.1'), 'the rule, not the address');
    const stored = await failure(
      agents.client.call(
        S.putByokKey,
        { blueprint: 'task-triage', api_key: k, provider: Provider.PROVIDER_OPENAI, base_url: internal },
        t.call,
      ),
    );
    assert.equal(stored.reason, 'BYOK_PROBE_UNAVAILABLE');

    // A key stored while its server's name resolved elsewhere (DNS changes; an allowlist shrinks):
    // the run's call is refused when it connects.
    agents.fake.probes.set(k, 'ok');
    await agents.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0 }, t.call);
    await agents.db.query(`UPDATE agent_configs SET base_url = $3 WHERE tenant_id = $1 AND agent_blueprint = $2`, [
      t.id,
      'task-triage',
      internal,
    ]);
    await server.script(k, [{ text: 'never' }]);
    const run = await runUntilDone(agents.client, t, 'task-triage');
    assert.equal(run.failure_category, FailureCategory.FAILURE_CATEGORY_PROVIDER_UNAVAILABLE);
    assert.match(run.failure_detail!, /base_url.*resolves to a loopback address, which the egress policy refuses/);
    assert.ok(!run.failure_detail!.includes('127.0.0.1'));
    assert.deepEqual(await server.requests(), [], 'nothing reached the server');
    assert.equal(agents.fake.chats(k).length, 0, "nor the platform's provider");
  });
});
