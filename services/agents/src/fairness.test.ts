/**
 * One tenant never slows or starves another: runs in flight per tenant are capped across
 * replicas, the worst guardrails a tenant can store run (that they cannot hold the service's thread
 * is shown in guardrails.test.ts, by the work they take: counted, not timed), and an app tool's
 * long result is cut before it reaches the model. Real notes-tasks, crm-pipelines and apps
 * services, a real MCP server behind the apps service, and a fake provider on loopback.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startMcpServer, type McpTestServer, type McpTestServerOptions } from '@workauto/apps/testing/mcp-servers';
import { eventually } from '@workauto/testing';
import {
  AgentRunStatus,
  FailureCategory,
  Provider,
  type AgentRun,
} from '@workauto/protos/workauto/agents/v1/agents.js';
import { S, newKey, startRunStack, tenant } from './test-support.js';
import { hasToolResult, type ChatBody, type ChatStep } from './testing/fake-provider.js';

const TENANT_CAP = 2;
type CallToolResult = ReturnType<NonNullable<McpTestServerOptions['onCall']>>;
const done = (r: AgentRun) =>
  r.status !== AgentRunStatus.AGENT_RUN_STATUS_QUEUED && r.status !== AgentRunStatus.AGENT_RUN_STATUS_RUNNING;

/** The run's input as the model received it (its first user message). */
function inputOf(body: ChatBody): string {
  const user = body.messages.find((m) => m.role === 'user');
  return typeof user?.content === 'string' ? user.content : JSON.stringify(user?.content);
}

describe('fairness between tenants', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  let mcp: McpTestServer;
  /** Calls of the `slow` tool waiting to be answered, oldest first. */
  const waiting: (() => void)[] = [];
  let inFlight = 0;
  let maxInFlight = 0;

  before(async () => {
    mcp = await startMcpServer({
      transport: 'streamable',
      tools: [{ name: 'slow' }, { name: 'long' }],
      onCall: (name, args) => {
        if (name === 'long') return { content: [{ type: 'text', text: 'x'.repeat(60_000) }] };
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        // The SDK's server awaits a handler's promise: the call hangs until the test answers it.
        return new Promise<CallToolResult>((resolve) =>
          waiting.push(() => {
            inFlight--;
            resolve({ content: [{ type: 'text', text: `slow:${JSON.stringify(args)}` }] });
          }),
        ) as unknown as CallToolResult;
      },
    });
    // Two replicas of two slots each: without a per-tenant cap, one tenant's hanging runs take all four.
    stack = await startRunStack({
      replicas: 2,
      apps: { toolCallTimeoutMs: 60_000 },
      config: { runs: { concurrency: 2, tenantConcurrency: TENANT_CAP } },
    });
  });
  after(async () => {
    for (const answer of waiting.splice(0)) answer();
    await stack?.stop();
    await mcp?.close();
  });

  async function withKey(
    blueprint: string,
    steps: ChatStep[] | ((body: ChatBody) => ChatStep),
    guardrails: unknown[] = [],
  ) {
    const t = tenant();
    const key = newKey('openai');
    stack.fake.script(key, steps);
    await stack.client.call(S.putAgentConfig, { blueprint, guardrails }, t.call);
    await stack.client.call(S.putByokKey, { blueprint, api_key: key, provider: Provider.PROVIDER_OPENAI }, t.call);
    return { ...t, key };
  }

  const get = (t: ReturnType<typeof tenant>, blueprint: string, id: string) =>
    stack.client.call(S.getAgentRun, { blueprint, id }, t.call);

  async function untilDone(t: ReturnType<typeof tenant>, blueprint: string, id: string, ms = 20_000) {
    let last: AgentRun | undefined;
    await eventually(`run ${id} ends`, async () => done((last = await get(t, blueprint, id))), ms, 50);
    return last!;
  }

  it("caps a tenant's runs in flight across replicas; another tenant's run starts within 5 s; the rest start oldest first", async () => {
    const a = await withKey('task-triage', (body) =>
      hasToolResult(body)
        ? { text: `done ${inputOf(body)}` }
        : { tools: [{ name: 'slow-app__slow', arguments: { run: inputOf(body) } }] },
    );
    await stack.addApp(a.call, 'slow-app', mcp.url, ['slow']);
    const runs: AgentRun[] = [];
    for (let i = 1; i <= 6; i++)
      runs.push(await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: `run-${i}` }, a.call));
    await eventually('A’s runs wait on the slow tool', () => waiting.length >= TENANT_CAP, 10_000);

    const b = await withKey('task-triage', [{ text: 'B is done' }]);
    const bRun = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'b' }, b.call);
    const bDone = await untilDone(b, 'task-triage', bRun.id, 5_000);
    assert.equal(bDone.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, bDone.failure_detail);

    const statuses = await Promise.all(runs.map((r) => get(a, 'task-triage', r.id)));
    assert.deepEqual(
      statuses.map((r) => AgentRunStatus[r.status]),
      [...Array(2).fill('AGENT_RUN_STATUS_RUNNING'), ...Array(4).fill('AGENT_RUN_STATUS_QUEUED')],
      "A's two oldest runs run; the other four stay queued while B's run came and went",
    );
    const callers = () => mcp.calls.map((c) => (c.arguments as { run: string }).run);
    assert.deepEqual(callers().sort(), ['run-1', 'run-2']);

    // Each answered call frees one slot: the oldest queued run takes it.
    for (let n = 3; n <= 6; n++) {
      waiting.shift()!();
      await eventually(`run-${n} calls the tool`, () => callers().length === n, 10_000);
      assert.equal(callers()[n - 1], `run-${n}`);
    }
    await eventually('every run called the tool and was answered', () => {
      waiting.shift()?.();
      return !waiting.length && mcp.calls.length >= 6;
    });
    for (const r of runs)
      assert.equal((await untilDone(a, 'task-triage', r.id)).status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED);
    assert.equal(maxInFlight, TENANT_CAP, 'never more than the cap of one tenant running at once');
  });

  it("cuts an app tool's long result to the built-in tools' limit before it goes to the model", async () => {
    const c = await withKey('task-triage', [
      { tools: [{ name: 'long-app__long', arguments: {} }] },
      { text: 'read it' },
    ]);
    await stack.addApp(c.call, 'long-app', mcp.url, ['long']);
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'go' }, c.call);
    assert.equal((await untilDone(c, 'task-triage', run.id)).status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED);
    const second = JSON.parse(stack.fake.chats(c.key)[1]!.body);
    const result: string = second.messages.find((m: { role: string }) => m.role === 'tool').content;
    assert.ok(result.startsWith('[{"type":"text","text":"xxx'), result.slice(0, 40));
    assert.equal(result.length, 20_000, 'cut to TOOL_RESULT_MAX_CHARS, as built-in results are');
  });

  it('runs a config with the worst deny_tools glob, offering the tools it leaves', async () => {
    const d = await withKey(
      'pipeline-review',
      [{ text: 'reviewed' }],
      [{ type: 'deny_tools', tools: [`${'*'.repeat(14)}Z`] }],
    );
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'pipeline-review', input: 'go' }, d.call);
    assert.equal((await untilDone(d, 'pipeline-review', run.id)).status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED);
    const offered = JSON.parse(stack.fake.chats(d.key)[0]!.body).tools.map(
      (x: { function: { name: string } }) => x.function.name,
    );
    assert.deepEqual(offered, ['list_deals', 'pipeline_summary', 'create_note', 'create_task'], 'nothing ends in Z');
  });

  it('runs a config whose block_pattern ^(a+)+$ checks an answer of 31 a and a !, and keeps the answer', async () => {
    const e = await withKey(
      'task-triage',
      [{ text: `${'a'.repeat(31)}!` }],
      [{ type: 'block_pattern', pattern: '^(a+)+$' }],
    );
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'go' }, e.call);
    const ended = await untilDone(e, 'task-triage', run.id);
    assert.equal(ended.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, ended.failure_detail);
    assert.equal(ended.output?.text, `${'a'.repeat(31)}!`);
  });

  it('fails a run whose stored block_pattern RE2 refuses (accepted before), before any provider call', async () => {
    const f = await withKey('task-triage', [{ text: 'never asked' }]);
    // Stored as an earlier version accepted it: JavaScript lookbehind.
    await stack.db.query(`UPDATE agent_configs SET guardrails = $2 WHERE tenant_id = $1`, [
      f.id,
      JSON.stringify([{ type: 'block_pattern', pattern: '(?<=key: )\\w+' }]),
    ]);
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'go' }, f.call);
    const ended = await untilDone(f, 'task-triage', run.id);
    assert.equal(ended.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
    assert.equal(ended.failure_category, FailureCategory.FAILURE_CATEGORY_GUARDRAIL_BLOCKED);
    assert.match(ended.failure_detail!, /guardrails\[0\]\.pattern .*RE2.*PUT \/agent-configs\/task-triage/);
    assert.equal(stack.fake.chats(f.key).length, 0, 'no provider call was paid for');
  });
});
