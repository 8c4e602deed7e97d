/**
 * Blueprints, configs and BYOK keys over real gRPC and PostgreSQL, against a fake provider on
 * loopback that speaks OpenAI's and Anthropic's HTTP APIs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Keyring } from '@workauto/crypto';
import { decodeEvent } from '@workauto/events';
import { createLogger } from '@workauto/logger';
import { captureLogs, eventually, freePort } from '@workauto/testing';
import { ByokStatus, ProbeCategory, ProbeStatus, Provider } from '@workauto/protos/workauto/agents/v1/agents.js';
import { keyContext } from './handlers/common.js';
import { rewrapKeys } from './worker/rewrap.js';
import { S, failure, newKey, startAgents, tenant } from './test-support.js';
import type { ProbeOutcome } from './testing/fake-provider.js';

describe('agent blueprints and configs', () => {
  let agents: Awaited<ReturnType<typeof startAgents>>;
  before(async () => {
    agents = await startAgents();
  });
  after(() => agents.stop());

  it('lists the blueprints with their models and tools; an unknown blueprint is a 404', async () => {
    const t = tenant();
    const list = await agents.client.call(S.listAgentBlueprints, {}, t.call);
    assert.deepEqual(
      list.data.map((b) => b.id),
      ['task-triage', 'pipeline-review', 'daily-briefing'],
    );
    assert.equal(list.has_more, false);
    assert.ok(list.data.every((b) => b.models?.openai && b.models.anthropic && b.tools.length > 0));
    const one = await agents.client.call(S.listAgentBlueprints, { limit: 1 }, t.call);
    assert.equal(one.has_more, true);
    const rest = await agents.client.call(S.listAgentBlueprints, { limit: 5, cursor: one.next_cursor! }, t.call);
    assert.deepEqual(
      rest.data.map((b) => b.id),
      ['pipeline-review', 'daily-briefing'],
    );
    const missing = await failure(agents.client.call(S.getAgentConfig, { blueprint: 'no-such' }, t.call));
    assert.equal(missing.code, grpc.status.NOT_FOUND);
    assert.equal(missing.reason, 'AGENT_BLUEPRINT_NOT_FOUND');
    assert.equal(
      (await failure(agents.client.call(S.putAgentConfig, { blueprint: 'no-such' }, t.call))).code,
      grpc.status.NOT_FOUND,
    );
  });

  it('PUT replaces the whole config: omitted fields revert to null and guardrails to []; a PUT without schedule clears it', async () => {
    const t = tenant();
    assert.equal(
      (await failure(agents.client.call(S.getAgentConfig, { blueprint: 'task-triage' }, t.call))).reason,
      'AGENT_CONFIG_NOT_FOUND',
    );
    assert.deepEqual(await agents.client.call(S.listAgentConfigs, {}, t.call), { data: [] });
    const guardrails = [
      { type: 'deny_tools', tools: ['create_*'] },
      { type: 'max_tool_calls', value: 3 },
      { type: 'block_pattern', pattern: 'secret\\d+' },
    ];
    const full = await agents.client.call(
      S.putAgentConfig,
      {
        blueprint: 'task-triage',
        budget_default_cents: 250,
        deadline_default_seconds: 120,
        guardrails,
        schedule: '*/2 * * * * *',
      },
      t.call,
    );
    assert.equal(full.agent_blueprint, 'task-triage');
    assert.equal(full.tenant_id, t.id);
    assert.equal(full.byok_status, ByokStatus.BYOK_STATUS_UNSET);
    assert.equal(full.budget_default_cents, 250);
    assert.equal(full.deadline_default_seconds, 120);
    assert.deepEqual(full.guardrails, guardrails);
    assert.equal(full.schedule, '*/2 * * * * *');
    const bare = await agents.client.call(S.putAgentConfig, { blueprint: 'task-triage' }, t.call);
    assert.equal(bare.id, full.id);
    assert.equal(bare.budget_default_cents, undefined);
    assert.equal(bare.deadline_default_seconds, undefined);
    assert.equal(bare.schedule, undefined);
    assert.deepEqual(bare.guardrails, []);
    const { rows } = await agents.db.query('SELECT schedule, schedule_next_at FROM agent_configs WHERE id = $1', [
      full.id,
    ]);
    assert.deepEqual(rows[0], { schedule: null, schedule_next_at: null });
    for (const schedule of ['0 9 * * 1-5', '@daily', '@hourly', '30 0 9 * * *']) {
      assert.equal(
        (await agents.client.call(S.putAgentConfig, { blueprint: 'task-triage', schedule }, t.call)).schedule,
        schedule,
      );
    }
    const listed = await agents.client.call(S.listAgentConfigs, {}, t.call);
    assert.deepEqual(
      listed.data.map((c) => c.agent_blueprint),
      ['task-triage'],
    );
    const events = await agents.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq`, [t.id]);
    assert.ok(events.rows.every((r) => r.event_type === 'agent_config.updated') && events.rows.length === 6);
  });

  it('refuses bad cron, bad guardrails and out-of-range numbers with 400s naming each field', async () => {
    const t = tenant();
    const fields = async (body: object) =>
      (
        await failure(agents.client.call(S.putAgentConfig, { blueprint: 'task-triage', ...body }, t.call))
      ).fieldViolations.map((v) => v.field);
    for (const schedule of ['* * * *', '* * * * * * *', 'every day', '@every 5m', '61 * * * *', '@reboot']) {
      assert.deepEqual(await fields({ schedule }), ['schedule'], schedule);
    }
    assert.deepEqual(await fields({ budget_default_cents: -1 }), ['budget_default_cents']);
    assert.deepEqual(await fields({ deadline_default_seconds: 0 }), ['deadline_default_seconds']);
    assert.deepEqual(await fields({ deadline_default_seconds: 86_401 }), ['deadline_default_seconds']);
    assert.deepEqual(
      await fields({
        guardrails: [
          { type: 'allow_tools', tools: ['list_tasks'] },
          { type: 'block_pattern', pattern: '(unclosed' },
          { type: 'no_such_rule' },
          { type: 'max_tool_calls', value: -2 },
          'deny everything',
          { type: 'deny_tools', tools: [] },
          { type: 'max_output_chars', value: 10, extra: true },
          { type: 'deny_tools', tools: ['ok', 'bad name'] },
        ],
      }),
      [
        'guardrails[1].pattern',
        'guardrails[2].type',
        'guardrails[3].value',
        'guardrails[4]',
        'guardrails[5].tools',
        'guardrails[6].extra',
        'guardrails[7].tools[1]',
      ],
    );
    assert.equal(
      (await failure(agents.client.call(S.getAgentConfig, { blueprint: 'task-triage' }, t.call))).code,
      grpc.status.NOT_FOUND,
      'nothing was written',
    );
  });

  it("keeps tenants apart: another tenant's config is a 404 and never listed", async () => {
    const a = tenant();
    const b = tenant();
    await agents.client.call(S.putAgentConfig, { blueprint: 'pipeline-review', schedule: '@daily' }, a.call);
    assert.equal(
      (await failure(agents.client.call(S.getAgentConfig, { blueprint: 'pipeline-review' }, b.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.deepEqual((await agents.client.call(S.listAgentConfigs, {}, b.call)).data, []);
    assert.equal(
      (await failure(agents.client.call(S.deleteByokKey, { blueprint: 'pipeline-review' }, b.call))).code,
      grpc.status.NOT_FOUND,
    );
  });
});

describe('provider keys: probe, encrypt, store', () => {
  let agents: Awaited<ReturnType<typeof startAgents>>;
  let logs: ReturnType<typeof captureLogs>;
  const usedKeys: string[] = [];
  before(async () => {
    logs = captureLogs();
    agents = await startAgents({ logger: createLogger('agents', 'debug') });
  });
  after(async () => {
    await agents.stop();
    logs.stop();
  });
  const key = (provider: 'openai' | 'anthropic', outcome: ProbeOutcome) => {
    const k = newKey(provider);
    agents.fake.probes.set(k, outcome);
    usedKeys.push(k);
    return k;
  };

  const OUTCOMES: [ProbeOutcome, ProbeCategory | undefined][] = [
    ['ok', undefined],
    [401, ProbeCategory.PROBE_CATEGORY_INVALID_KEY],
    [403, ProbeCategory.PROBE_CATEGORY_PERMISSION_DENIED],
    [402, ProbeCategory.PROBE_CATEGORY_INSUFFICIENT_QUOTA],
    ['quota', ProbeCategory.PROBE_CATEGORY_INSUFFICIENT_QUOTA],
    [429, ProbeCategory.PROBE_CATEGORY_RATE_LIMITED],
    [500, ProbeCategory.PROBE_CATEGORY_PROVIDER_UNAVAILABLE],
    [529, ProbeCategory.PROBE_CATEGORY_PROVIDER_UNAVAILABLE],
    ['hang', ProbeCategory.PROBE_CATEGORY_PROVIDER_UNAVAILABLE],
  ];

  for (const provider of ['openai', 'anthropic'] as const) {
    it(`validate-key maps every ${provider} answer to its category; the key travels only as the SDK's credential header`, async () => {
      const t = tenant();
      for (const [outcome, category] of OUTCOMES) {
        if (provider === 'anthropic' && outcome === 'quota') continue; // Anthropic's quota answer is 402
        const k = key(provider, outcome);
        const before = agents.fake.requests.length;
        const result = await agents.client.call(S.validateKey, { api_key: k, provider: 0 }, t.call);
        assert.equal(
          result.status,
          category === undefined ? ProbeStatus.PROBE_STATUS_VALID : ProbeStatus.PROBE_STATUS_INVALID,
          `${outcome}`,
        );
        assert.equal(result.category, category ?? 0, `${outcome}`);
        if (category !== undefined)
          assert.ok(result.message && !result.message.includes(k), 'a message, without the key');
        const sent = agents.fake.requests.slice(before);
        // The fake never answers a hang: the answer above came from the probe's timeout, which ended the request.
        if (outcome === 'hang')
          await eventually('the probe timeout aborted the hanging request', () => sent[0]?.aborted === true);
        assert.equal(sent.length, 1, `one request, no retries (${outcome})`);
        const r = sent[0]!;
        assert.equal(r.provider, provider, 'the default provider follows the key prefix');
        assert.equal(r.method, 'GET');
        assert.equal(r.path, '/v1/models');
        const carrying = Object.entries(r.headers)
          .filter(([, v]) => String(v).includes(k))
          .map(([h]) => h);
        assert.deepEqual(carrying, ['authorization']);
        assert.equal(r.headers.authorization, `Bearer ${k}`);
        assert.ok(!r.path.includes(k) && !r.body.includes(k));
      }
    });
  }

  it('validate-key reports an unreachable provider as network_error, and honours an explicit provider', async () => {
    const port = await freePort();
    const offline = await startAgents({
      config: {
        providers: { openaiBaseUrl: `http://127.0.0.1:${port}/v1`, anthropicBaseUrl: `http://127.0.0.1:${port}` },
      },
      fake: agents.fake,
    });
    try {
      const t = tenant();
      const r = await offline.client.call(S.validateKey, { api_key: newKey('openai'), provider: 0 }, t.call);
      assert.equal(r.category, ProbeCategory.PROBE_CATEGORY_NETWORK_ERROR);
    } finally {
      await offline.stop();
    }
    const k = key('openai', 'ok');
    agents.fake.probes.set(k, 'ok');
    const before = agents.fake.requests.length;
    await agents.client.call(S.validateKey, { api_key: k, provider: Provider.PROVIDER_ANTHROPIC }, tenant().call);
    assert.equal(agents.fake.requests[before]!.provider, 'anthropic');
  });

  it('refuses a malformed key with a 400 that does not echo it, before any probe', async () => {
    const before = agents.fake.requests.length;
    for (const api_key of ['', 'short', 'sk-has a space in it', 'sk-line\nbreak-0123456789', 'x'.repeat(1025)]) {
      const f = await failure(agents.client.call(S.validateKey, { api_key, provider: 0 }, tenant().call));
      assert.equal(f.code, grpc.status.INVALID_ARGUMENT);
      assert.deepEqual(
        f.fieldViolations.map((v) => v.field),
        ['api_key'],
      );
      if (api_key.length > 4) assert.ok(!f.message.includes(api_key));
    }
    assert.equal(agents.fake.requests.length, before);
  });

  it('byok-key stores a valid key encrypted (version + 1, status valid); a refusal or an undecided probe changes nothing', async () => {
    const t = tenant();
    const first = key('anthropic', 'ok');
    const stored = await agents.client.call(
      S.putByokKey,
      { blueprint: 'task-triage', api_key: first, provider: 0 },
      t.call,
    );
    assert.equal(stored.byok_status, ByokStatus.BYOK_STATUS_VALID);
    assert.ok(stored.byok_last_probed_at);
    assert.equal(stored.byok_status_reason, undefined);
    assert.ok(!JSON.stringify(stored).includes(first));
    const row = async () => (await agents.db.query('SELECT * FROM agent_configs WHERE tenant_id = $1', [t.id])).rows[0];
    const r1 = await row();
    assert.equal(r1.byok_key_version, 1);
    assert.equal(r1.byok_provider, 'anthropic');
    assert.ok(!JSON.stringify(r1).includes(first), 'no column holds the key in clear');
    const keyring = Keyring.fromEnv(agents.encryptionKeys);
    assert.equal(keyring.decrypt(r1.byok_ciphertext, keyContext(t.id, 'task-triage')), first);

    const refusals: [ProbeOutcome, grpc.status, string, string][] = [
      [401, grpc.status.INVALID_ARGUMENT, 'BYOK_KEY_INVALID', 'invalid_key'],
      [403, grpc.status.INVALID_ARGUMENT, 'BYOK_KEY_INVALID', 'permission_denied'],
      [402, grpc.status.INVALID_ARGUMENT, 'BYOK_KEY_INVALID', 'insufficient_quota'],
      ['quota', grpc.status.INVALID_ARGUMENT, 'BYOK_KEY_INVALID', 'insufficient_quota'],
      [429, grpc.status.UNAVAILABLE, 'BYOK_PROBE_UNAVAILABLE', 'rate_limited'],
      [500, grpc.status.UNAVAILABLE, 'BYOK_PROBE_UNAVAILABLE', 'provider_unavailable'],
      [529, grpc.status.UNAVAILABLE, 'BYOK_PROBE_UNAVAILABLE', 'provider_unavailable'],
      ['hang', grpc.status.UNAVAILABLE, 'BYOK_PROBE_UNAVAILABLE', 'provider_unavailable'],
    ];
    for (const [outcome, code, reason, category] of refusals) {
      const bad = key('openai', outcome);
      const f = await failure(
        agents.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: bad, provider: 0 }, t.call),
      );
      assert.equal(f.code, code, `${outcome}`);
      assert.equal(f.reason, reason, `${outcome}`);
      assert.equal(f.metadata.category, category, `${outcome}`);
      assert.ok(!JSON.stringify(f).includes(bad), 'the error never echoes the key');
      const now = await row();
      assert.equal(now.byok_ciphertext, r1.byok_ciphertext, `${outcome}: the previous key stays`);
      assert.equal(now.byok_key_version, 1);
      assert.equal(now.byok_status, 'valid');
      assert.deepEqual(now.byok_last_probed_at, r1.byok_last_probed_at, 'only a stored key moves byok_last_probed_at');
    }
    const second = key('openai', 'ok');
    const rotated = await agents.client.call(
      S.putByokKey,
      { blueprint: 'task-triage', api_key: second, provider: 0 },
      t.call,
    );
    assert.equal(rotated.byok_status, ByokStatus.BYOK_STATUS_VALID);
    const r2 = await row();
    assert.equal(r2.byok_key_version, 2);
    assert.equal(r2.byok_provider, 'openai');
    assert.equal(keyring.decrypt(r2.byok_ciphertext, keyContext(t.id, 'task-triage')), second);

    const removed = await agents.client.call(S.deleteByokKey, { blueprint: 'task-triage' }, t.call);
    assert.equal(removed.byok_status, ByokStatus.BYOK_STATUS_UNSET);
    const r3 = await row();
    assert.equal(r3.byok_ciphertext, null);
    assert.equal(r3.byok_provider, null);

    const { rows } = await agents.db.query('SELECT event_type, payload FROM outbox WHERE tenant_id = $1 ORDER BY seq', [
      t.id,
    ]);
    assert.deepEqual(
      rows.map((r) => r.event_type),
      ['agent_config.byok_key_set', 'agent_config.byok_key_set', 'agent_config.byok_key_removed'],
    );
    for (const r of rows) {
      const text = Buffer.from(r.payload).toString('latin1');
      assert.ok(!text.includes(first) && !text.includes(second), 'no event carries a key');
      const e = decodeEvent(r.payload);
      assert.equal(e.data?.byok_status, r.event_type.endsWith('removed') ? 'unset' : 'valid');
    }
    assert.deepEqual(decodeEvent(rows[1].payload).metadata, { provider: 'openai', key_version: 2, base_url: null });
  });

  it('byok-key on an unknown blueprint is a 404 before any probe', async () => {
    const before = agents.fake.requests.length;
    const f = await failure(
      agents.client.call(S.putByokKey, { blueprint: 'nope', api_key: key('openai', 'ok'), provider: 0 }, tenant().call),
    );
    assert.equal(f.code, grpc.status.NOT_FOUND);
    assert.equal(agents.fake.requests.length, before);
  });

  it('re-encrypts stored keys under the active keyring key after a rotation', async () => {
    const t = tenant();
    const k = key('openai', 'ok');
    await agents.client.call(S.putByokKey, { blueprint: 'daily-briefing', api_key: k, provider: 0 }, t.call);
    const rotated = Keyring.fromEnv(`${Keyring.generateSpec('k2')},${agents.encryptionKeys}`);
    assert.ok((await rewrapKeys(agents.db, rotated)) >= 1);
    const { rows } = await agents.db.query(
      'SELECT byok_ciphertext, byok_key_id FROM agent_configs WHERE tenant_id = $1',
      [t.id],
    );
    assert.equal(rows[0].byok_key_id, 'k2');
    assert.equal(rotated.decrypt(rows[0].byok_ciphertext, keyContext(t.id, 'daily-briefing')), k);
    assert.equal(await rewrapKeys(agents.db as never, rotated), 0, 'idempotent');
  });

  it('never writes a key to the logs, even at debug level', () => {
    const text = logs.text();
    assert.ok(text.length > 0, 'the debug logs were captured');
    for (const k of usedKeys) assert.ok(!text.includes(k), 'a key reached the logs');
  });
});
