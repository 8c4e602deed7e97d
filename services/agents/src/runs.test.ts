/**
 * Agent runs over real gRPC and PostgreSQL: workers, the tool-using loop against a fake provider
 * with scripted tool calls, real notes-tasks and crm-pipelines as the tools' services, budgets,
 * deadlines, guardrails, cancel, the scheduler with two replicas, and paging.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { decodeEvent } from '@workauto/events';
import { eventually, freePort, ManualClock } from '@workauto/testing';
import {
  AgentRunStatus,
  ByokStatus,
  FailureCategory,
  Provider,
  type AgentRun,
} from '@workauto/protos/workauto/agents/v1/agents.js';
import { NotesTasksServiceService as Notes } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { S, failure, newKey, runUntilDone as runUntil, startRunStack, tenant } from './test-support.js';
import type { ChatStep } from './testing/fake-provider.js';
import { scheduleDueRuns } from './worker/scheduler.js';

const PLATFORM_ANTHROPIC_KEY = newKey('anthropic');

describe('agent runs', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  before(async () => {
    stack = await startRunStack({
      config: { platformKeys: { anthropic: PLATFORM_ANTHROPIC_KEY }, platformFeeBps: 1_000 },
    });
  });
  after(() => stack.stop());

  /** A tenant with its own OpenAI key for a blueprint, whose chats follow `steps`. */
  async function tenantWithKey(blueprint: string, steps: ChatStep[], guardrails: unknown[] = []) {
    const t = tenant();
    const k = newKey('openai');
    stack.fake.script(k, steps);
    await stack.client.call(S.putAgentConfig, { blueprint, guardrails }, t.call);
    await stack.client.call(S.putByokKey, { blueprint, api_key: k, provider: Provider.PROVIDER_OPENAI }, t.call);
    return { ...t, key: k };
  }

  const runUntilDone = (
    t: ReturnType<typeof tenant>,
    blueprint: string,
    body: Partial<{ input: unknown; budget_usd_cents: number; deadline_seconds: number }> = {},
  ): Promise<AgentRun> => runUntil(stack.client, t, blueprint, body);

  it('calls a built-in tool as its agent (a task is really created), then answers: succeeded, output, cost from usage', async () => {
    const t = await tenantWithKey('task-triage', [
      {
        tools: [{ name: 'create_task', arguments: { title: 'Follow up with ACME', priority: 'high' } }],
        usage: { input: 100_000, output: 10_000 },
      },
      { text: 'Created one follow-up task.', usage: { input: 120_000, output: 5_000 } },
    ]);
    const run = await runUntilDone(t, 'task-triage', { input: { focus: 'overdue' } });
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    assert.deepEqual(run.output, {
      text: 'Created one follow-up task.',
      steps: 2,
      tool_calls: [{ name: 'create_task', is_error: false }],
    });
    // gpt-4.1-mini: 40 ¢/Mtok in, 160 ¢/Mtok out → 5.6 ¢ + 5.6 ¢ = 11.2 ¢, shown rounded up.
    assert.equal(run.cost_usd_cents, 12);
    assert.equal(run.platform_fee_cents, 0, "the tenant's own key: no platform fee");
    assert.equal(run.consecutive_failures, 0);
    assert.deepEqual(run.input, { focus: 'overdue' });
    assert.ok(run.deadline_at === undefined);
    const tasks = await stack.notesClient.call(Notes.listTasks, {}, t.call);
    assert.deepEqual(
      tasks.data.map((x) => x.title),
      ['Follow up with ACME'],
    );
    const { rows } = await stack.notesDb.query(
      `SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'task.created'`,
      [t.id],
    );
    assert.deepEqual(
      decodeEvent(rows[0].payload).actor,
      { type: 'agent', id: run.id, member_id: '' },
      "audited as the run's agent",
    );
    const chats = stack.fake.chats(t.key);
    assert.equal(chats.length, 2);
    const first = JSON.parse(chats[0]!.body);
    assert.deepEqual(
      first.tools.map((x: { function: { name: string } }) => x.function.name),
      ['list_tasks', 'create_task', 'search_notes'],
    );
    assert.equal(first.model, 'gpt-4.1-mini');
    const second = JSON.parse(chats[1]!.body);
    const toolMessage = second.messages.find((m: { role: string }) => m.role === 'tool');
    assert.equal(JSON.parse(toolMessage.content).id, tasks.data[0]!.id, 'the tool result went back to the model');
    const events = await stack.db.query(
      `SELECT event_type FROM outbox WHERE tenant_id = $1 AND resource_type = 'agent_run' ORDER BY seq`,
      [t.id],
    );
    assert.deepEqual(
      events.rows.map((r) => r.event_type),
      ['agent_run.created', 'agent_run.started', 'agent_run.succeeded'],
    );
  });

  it("speaks Anthropic's tool use: tool_use in, tool_result back with its id, usage priced for claude", async () => {
    const t = tenant();
    const k = newKey('anthropic');
    stack.fake.script(k, [
      {
        text: 'Let me look.',
        tools: [
          { name: 'search_notes', arguments: { query: 'renewal' } },
          { name: 'create_task', arguments: { title: 'Renewal call', priority: 'urgent' } },
        ],
        usage: { input: 10_000, output: 2_000 },
      },
      { text: 'Done.', usage: { input: 12_000, output: 1_000 } },
    ]);
    await stack.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0 }, t.call);
    const run = await runUntilDone(t, 'task-triage');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    assert.deepEqual(run.output, {
      text: 'Done.',
      steps: 2,
      tool_calls: [
        { name: 'search_notes', is_error: false },
        { name: 'create_task', is_error: false },
      ],
    });
    // claude-haiku-4-5: 22,000 × 100 + 3,000 × 500 millionths of a cent = 3.7 ¢ → 4.
    assert.equal(run.cost_usd_cents, 4);
    const [first, second] = stack.fake.chats(k).map((r) => JSON.parse(r.body));
    assert.equal(first.system.length > 0, true);
    assert.deepEqual(
      first.tools.map((x: { name: string }) => x.name),
      ['list_tasks', 'create_task', 'search_notes'],
    );
    assert.ok(first.tools.every((x: { input_schema: { type: string } }) => x.input_schema.type === 'object'));
    const assistant = second.messages[1];
    assert.equal(assistant.role, 'assistant');
    const uses = assistant.content.filter((c: { type: string }) => c.type === 'tool_use');
    const results = second.messages[2].content;
    assert.deepEqual(
      results.map((c: { type: string; tool_use_id: string }) => [c.type, c.tool_use_id]),
      uses.map((u: { id: string }) => ['tool_result', u.id]),
    );
    assert.equal(JSON.parse(results[1].content).title, 'Renewal call');
    assert.equal((await stack.notesClient.call(Notes.listTasks, {}, t.call)).data[0]!.priority, 5, 'urgent');
  });

  it("gives a tool's refusal back to the model (is_error) and goes on", async () => {
    const t = await tenantWithKey('task-triage', [
      { tools: [{ name: 'create_task', arguments: { title: '' } }] },
      { tools: [{ name: 'no_such_tool', arguments: {} }] },
      { text: 'Could not create it.' },
    ]);
    const run = await runUntilDone(t, 'task-triage');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    assert.deepEqual(run.output?.tool_calls, [
      { name: 'create_task', is_error: true },
      { name: 'no_such_tool', is_error: true },
    ]);
  });

  it("runs on the platform's key for the blueprint's default provider, with the platform fee", async () => {
    const t = tenant();
    stack.fake.script(PLATFORM_ANTHROPIC_KEY, [
      { text: 'Pipeline looks fine.', usage: { input: 200_000, output: 20_000 } },
    ]);
    const run = await runUntilDone(t, 'pipeline-review');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    // claude-haiku-4-5: 100 ¢/Mtok in, 500 ¢/Mtok out → 20 ¢ + 10 ¢ = 30 ¢; fee 10 % → 3 ¢.
    assert.equal(run.cost_usd_cents, 30);
    assert.equal(run.platform_fee_cents, 3);
    const chat = stack.fake.chats(PLATFORM_ANTHROPIC_KEY).at(-1)!;
    assert.equal(chat.provider, 'anthropic');
    assert.equal(JSON.parse(chat.body).model, 'claude-haiku-4-5');
  });

  it('fails provider_auth without any key, and counts consecutive failures until a success', async () => {
    const t = tenant();
    const first = await runUntilDone(t, 'daily-briefing'); // default provider openai: no platform key for it
    assert.equal(first.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
    assert.equal(first.failure_category, FailureCategory.FAILURE_CATEGORY_PROVIDER_AUTH);
    assert.match(first.failure_detail!, /byok-key/);
    assert.equal(first.consecutive_failures, 1);
    const second = await runUntilDone(t, 'daily-briefing');
    assert.equal(second.consecutive_failures, 2);
    const k = newKey('openai');
    stack.fake.script(k, [{ text: 'ok' }]);
    await stack.client.call(S.putByokKey, { blueprint: 'daily-briefing', api_key: k, provider: 0 }, t.call);
    const third = await runUntilDone(t, 'daily-briefing');
    assert.equal(third.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED);
    assert.equal(third.consecutive_failures, 0);
  });

  it('calls the provider with the key set last: a run after PUT byok-key never uses the replaced key', async () => {
    const t = await tenantWithKey('task-triage', [{ text: 'first' }]);
    assert.equal((await runUntilDone(t, 'task-triage')).status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED);
    const replacement = newKey('openai');
    stack.fake.script(replacement, [{ text: 'second' }]);
    await stack.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: replacement, provider: 0 }, t.call);
    const run = await runUntilDone(t, 'task-triage');
    assert.deepEqual(
      [run.status, (run.output as { text: string }).text],
      [AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, 'second'],
    );
    assert.equal(stack.fake.chats(t.key).length, 1, 'the replaced key was used by the first run only');
    assert.equal(stack.fake.chats(replacement).length, 1);
  });

  const providerFailures: [ChatStep, FailureCategory, ByokStatus][] = [
    [{ error: 401 }, FailureCategory.FAILURE_CATEGORY_PROVIDER_AUTH, ByokStatus.BYOK_STATUS_INVALID],
    [{ error: 403 }, FailureCategory.FAILURE_CATEGORY_PROVIDER_AUTH, ByokStatus.BYOK_STATUS_INVALID],
    [{ error: 'quota' }, FailureCategory.FAILURE_CATEGORY_PROVIDER_QUOTA, ByokStatus.BYOK_STATUS_QUOTA_EXHAUSTED],
    [{ error: 402 }, FailureCategory.FAILURE_CATEGORY_PROVIDER_QUOTA, ByokStatus.BYOK_STATUS_QUOTA_EXHAUSTED],
    [{ error: 429 }, FailureCategory.FAILURE_CATEGORY_PROVIDER_RATE_LIMITED, ByokStatus.BYOK_STATUS_VALID],
    [{ error: 500 }, FailureCategory.FAILURE_CATEGORY_PROVIDER_UNAVAILABLE, ByokStatus.BYOK_STATUS_VALID],
    [{ error: 529 }, FailureCategory.FAILURE_CATEGORY_PROVIDER_UNAVAILABLE, ByokStatus.BYOK_STATUS_VALID],
  ];
  for (const [step, category, byok] of providerFailures) {
    it(`maps a provider's ${JSON.stringify(step)} to ${FailureCategory[category]} and byok_status ${ByokStatus[byok]}`, async () => {
      const t = await tenantWithKey('task-triage', [step]);
      const run = await runUntilDone(t, 'task-triage');
      assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
      assert.equal(run.failure_category, category);
      assert.ok(run.failure_detail && !run.failure_detail.includes(t.key), 'a readable detail without the key');
      const config = await stack.client.call(S.getAgentConfig, { blueprint: 'task-triage' }, t.call);
      assert.equal(config.byok_status, byok);
      if (byok !== ByokStatus.BYOK_STATUS_VALID)
        assert.ok(config.byok_status_reason && !config.byok_status_reason.includes(t.key));
    });
  }

  it('stops at the budget: no provider call after the budget is passed, the cost so far kept', async () => {
    const t = await tenantWithKey('task-triage', [
      { tools: [{ name: 'list_tasks', arguments: {} }], usage: { input: 100_000, output: 10_000 } },
      { text: 'never reached' },
    ]);
    const run = await runUntilDone(t, 'task-triage', { budget_usd_cents: 2 });
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
    assert.equal(run.failure_category, FailureCategory.FAILURE_CATEGORY_BUDGET_EXCEEDED);
    assert.equal(run.cost_usd_cents, 6);
    assert.equal(run.budget_usd_cents, 2);
    assert.equal(run.output?.steps, 1);
    assert.equal(stack.fake.chats(t.key).length, 1);
  });

  it('stops at the deadline, also when the final answer is what passes it, keeping the output so far', async () => {
    // The final answer is held until the run has ended: a run that waited for it would never end.
    const finalAnswer = Promise.withResolvers<void>();
    const t = await tenantWithKey('task-triage', [
      { tools: [{ name: 'list_tasks', arguments: {} }], text: 'Looking at tasks.' },
      { gate: finalAnswer.promise, then: { text: 'too late' } },
    ]);
    const run = await runUntilDone(t, 'task-triage', { deadline_seconds: 1 }).finally(() => finalAnswer.resolve());
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
    assert.equal(run.failure_category, FailureCategory.FAILURE_CATEGORY_DEADLINE_EXCEEDED);
    assert.ok(run.deadline_at);
    assert.deepEqual(run.output, {
      text: 'Looking at tasks.',
      steps: 1,
      tool_calls: [{ name: 'list_tasks', is_error: false }],
    });
  });

  const guardrailCases: [string, unknown[], ChatStep[]][] = [
    [
      'deny_tools',
      [{ type: 'deny_tools', tools: ['create_*'] }],
      [{ tools: [{ name: 'create_task', arguments: { title: 'x' } }] }],
    ],
    [
      'allow_tools',
      [{ type: 'allow_tools', tools: ['list_tasks'] }],
      [{ tools: [{ name: 'search_notes', arguments: { query: 'x' } }] }],
    ],
    [
      'max_tool_calls',
      [{ type: 'max_tool_calls', value: 1 }],
      [
        {
          tools: [
            { name: 'list_tasks', arguments: {} },
            { name: 'list_tasks', arguments: {} },
          ],
        },
      ],
    ],
    ['block_pattern', [{ type: 'block_pattern', pattern: 'SECRET-\\d+' }], [{ text: 'the code is SECRET-42' }]],
  ];
  for (const [name, guardrails, steps] of guardrailCases) {
    it(`fails guardrail_blocked on ${name}`, async () => {
      const t = await tenantWithKey('task-triage', steps, guardrails);
      const run = await runUntilDone(t, 'task-triage');
      assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
      assert.equal(run.failure_category, FailureCategory.FAILURE_CATEGORY_GUARDRAIL_BLOCKED, run.failure_detail);
      assert.ok(!JSON.stringify(run.output).includes('SECRET-42'));
      if (name === 'deny_tools') {
        const offered = JSON.parse(stack.fake.chats(t.key)[0]!.body).tools.map(
          (x: { function: { name: string } }) => x.function.name,
        );
        assert.deepEqual(offered, ['list_tasks', 'search_notes'], 'a denied tool is not even offered');
      }
    });
  }

  it('fails a run whose job ran out of attempts before it ever started: it never stays queued', async () => {
    const t = await tenantWithKey('task-triage', [{ text: 'never asked' }]);
    const run = await stack.client.call(
      S.createAgentRun,
      { blueprint: 'task-triage', input: 'refused start', run_at: new Date(Date.now() + 3_600_000) },
      t.call,
    );
    // The database refuses this run's start (a fault of the test's making); its job gets one attempt.
    await stack.db.query(`CREATE OR REPLACE FUNCTION refuse_start() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'the test refuses this start'; END $$`);
    await stack.db.query(`CREATE TRIGGER refuse_start BEFORE UPDATE ON agent_runs FOR EACH ROW
      WHEN (NEW.id = '${run.id}' AND NEW.status = 'running') EXECUTE FUNCTION refuse_start()`);
    try {
      await stack.db.query(`UPDATE jobs SET max_attempts = 1, next_attempt_at = now() WHERE payload->>'run_id' = $1`, [
        run.id,
      ]);
      let last = run;
      await eventually(
        `run ${run.id} fails`,
        async () => {
          last = await stack.client.call(S.getAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
          return last.status === AgentRunStatus.AGENT_RUN_STATUS_FAILED;
        },
        20_000,
        50,
      ).catch(() => assert.fail(`the run stayed ${AgentRunStatus[last.status]} after its job gave up`));
      assert.equal(last.failure_category, FailureCategory.FAILURE_CATEGORY_INTERNAL);
      assert.match(last.failure_detail!, /could not be started after repeated attempts.*create a new run/);
      assert.equal(stack.fake.chats(t.key).length, 0);
    } finally {
      await stack.db.query(`DROP TRIGGER refuse_start ON agent_runs`);
      await stack.db.query(`DROP FUNCTION refuse_start()`);
    }
  });

  it('cuts the answer at max_output_chars', async () => {
    const t = await tenantWithKey(
      'task-triage',
      [{ text: 'x'.repeat(100) }],
      [{ type: 'max_output_chars', value: 10 }],
    );
    const run = await runUntilDone(t, 'task-triage');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED);
    assert.equal(run.output?.text, 'x'.repeat(10));
  });

  it('cancels a queued run (and again: 200 unchanged); a finished run is a 409', async () => {
    const t = await tenantWithKey('task-triage', [{ text: 'ok' }]);
    const later = new Date(Date.now() + 3_600_000);
    const run = await stack.client.call(
      S.createAgentRun,
      { blueprint: 'task-triage', input: 'later', run_at: later },
      t.call,
    );
    const cancelled = await stack.client.call(S.cancelAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
    assert.equal(cancelled.status, AgentRunStatus.AGENT_RUN_STATUS_CANCELLED);
    const again = await stack.client.call(S.cancelAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
    assert.deepEqual(again, cancelled);
    const done = await runUntilDone(t, 'task-triage');
    assert.equal(done.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED);
    const f = await failure(stack.client.call(S.cancelAgentRun, { blueprint: 'task-triage', id: done.id }, t.call));
    assert.equal(f.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(f.reason, 'AGENT_RUN_FINISHED');
    assert.equal(
      (await failure(stack.client.call(S.cancelAgentRun, { blueprint: 'task-triage', id: done.id }, tenant().call)))
        .code,
      grpc.status.NOT_FOUND,
    );
    const events = await stack.db.query(`SELECT event_type FROM outbox WHERE resource_id = $1 ORDER BY seq`, [run.id]);
    assert.deepEqual(
      events.rows.map((r) => r.event_type),
      ['agent_run.created', 'agent_run.cancelled'],
    );
  });

  it('cancels once under 20 parallel cancels: all answer the cancelled run, one event', async () => {
    const t = tenant();
    const run = await stack.client.call(
      S.createAgentRun,
      { blueprint: 'task-triage', input: 'x', run_at: new Date(Date.now() + 3_600_000) },
      t.call,
    );
    const all = await Promise.all(
      Array.from({ length: 20 }, () =>
        stack.client.call(S.cancelAgentRun, { blueprint: 'task-triage', id: run.id }, t.call),
      ),
    );
    assert.ok(
      all.every(
        (r) =>
          r.status === AgentRunStatus.AGENT_RUN_STATUS_CANCELLED &&
          r.updated_at!.getTime() === all[0]!.updated_at!.getTime(),
      ),
    );
    const events = await stack.db.query(
      `SELECT count(*)::int AS n FROM outbox WHERE resource_id = $1 AND event_type = 'agent_run.cancelled'`,
      [run.id],
    );
    assert.equal(events.rows[0].n, 1);
  });

  it('cancels a running run at its next status check (AGENT_RUN_HEARTBEAT_MS, at most 5 s): the provider call in flight is aborted, the cost so far kept', async () => {
    const t = await tenantWithKey('task-triage', [
      { tools: [{ name: 'list_tasks', arguments: {} }], usage: { input: 100_000, output: 0 } },
      { hang: true },
    ]);
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'hang' }, t.call);
    await eventually('the second provider call hangs', () => stack.fake.chats(t.key).length === 2, 10_000);
    const running = await stack.client.call(S.getAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
    assert.equal(running.status, AgentRunStatus.AGENT_RUN_STATUS_RUNNING);
    const cancelled = await stack.client.call(S.cancelAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
    assert.equal(cancelled.status, AgentRunStatus.AGENT_RUN_STATUS_CANCELLED);
    await eventually('the hanging provider call is aborted', () => stack.fake.chats(t.key)[1]!.aborted);
    const after = await stack.client.call(S.getAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
    assert.equal(after.status, AgentRunStatus.AGENT_RUN_STATUS_CANCELLED);
    assert.equal(after.cost_usd_cents, 4, "the first call's cost is kept");
  });

  it('lists runs newest first by an RFC 3339 cursor over 250 runs created at once, with a status filter; tenants apart', async () => {
    const t = tenant();
    const later = new Date(Date.now() + 3_600_000);
    const ids: string[] = [];
    for (let i = 0; i < 250; i += 25) {
      const batch = await Promise.all(
        Array.from({ length: 25 }, () =>
          stack.client.call(S.createAgentRun, { blueprint: 'pipeline-review', input: i, run_at: later }, t.call),
        ),
      );
      ids.push(...batch.map((r) => r.id));
    }
    const seen: AgentRun[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await stack.client.call(
        S.listAgentRuns,
        { blueprint: 'pipeline-review', limit: 60, ...(cursor ? { cursor } : {}), status: 0 },
        t.call,
      );
      seen.push(...page.data);
      if (!page.has_more) break;
      assert.match(page.next_cursor!, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      // The cursor is the last run's created_at exactly as the API shows it (a client may page by it).
      assert.equal(page.next_cursor, page.data.at(-1)!.created_at!.toISOString().replace('Z', '000Z'));
      cursor = page.next_cursor;
    }
    assert.equal(seen.length, 250);
    assert.equal(new Set(seen.map((r) => r.id)).size, 250);
    assert.deepEqual(new Set(seen.map((r) => r.id)), new Set(ids));
    const { rows } = await stack.db.query(
      `SELECT count(DISTINCT created_at)::int AS n FROM agent_runs WHERE tenant_id = $1`,
      [t.id],
    );
    assert.equal(rows[0].n, 250, 'no two runs of a tenant share a created_at');
    for (const id of ids.slice(0, 3))
      await stack.client.call(S.cancelAgentRun, { blueprint: 'pipeline-review', id }, t.call);
    const cancelled = await stack.client.call(
      S.listAgentRuns,
      { blueprint: 'pipeline-review', status: AgentRunStatus.AGENT_RUN_STATUS_CANCELLED },
      t.call,
    );
    assert.deepEqual(new Set(cancelled.data.map((r) => r.id)), new Set(ids.slice(0, 3)));
    assert.equal(
      (await stack.client.call(S.listAgentRuns, { blueprint: 'pipeline-review', limit: 500, status: 0 }, t.call)).data
        .length,
      200,
      'limit clamps to 200',
    );
    assert.deepEqual(
      (
        await failure(
          stack.client.call(S.listAgentRuns, { blueprint: 'pipeline-review', cursor: 'yesterday', status: 0 }, t.call),
        )
      ).fieldViolations.map((v) => v.field),
      ['cursor'],
    );
    assert.deepEqual(
      (
        await failure(stack.client.call(S.listAgentRuns, { blueprint: 'pipeline-review', limit: 0, status: 0 }, t.call))
      ).fieldViolations.map((v) => v.field),
      ['limit'],
    );
    const other = tenant();
    assert.deepEqual(
      (await stack.client.call(S.listAgentRuns, { blueprint: 'pipeline-review', status: 0 }, other.call)).data,
      [],
    );
    assert.equal(
      (await failure(stack.client.call(S.getAgentRun, { blueprint: 'pipeline-review', id: ids[0]! }, other.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.equal(
      (await failure(stack.client.call(S.getAgentRun, { blueprint: 'task-triage', id: ids[0]! }, t.call))).code,
      grpc.status.NOT_FOUND,
      'a run is found under its own blueprint only',
    );
  });

  it("fails tool_error when a tool's service is down", async () => {
    const t = await tenantWithKey('task-triage', [
      { tools: [{ name: 'list_tasks', arguments: {} }] },
      { text: 'never' },
    ]);
    await stack.stopNotes();
    const run = await runUntilDone(t, 'task-triage');
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
    assert.equal(run.failure_category, FailureCategory.FAILURE_CATEGORY_TOOL_ERROR, run.failure_detail);
    assert.match(run.failure_detail!, /list_tasks/);
  });
});

describe('the scheduler with two replicas', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  // Schedules run on a clock the tests move: half a second past an even second, ten minutes ago
  // (runs are due at their tick, which is then in the past for the run workers too).
  const clock = new ManualClock(Math.floor((Date.now() - 600_000) / 2_000) * 2_000 + 500);
  before(async () => {
    stack = await startRunStack({ replicas: 2, config: { clock } });
    // Each replica's scheduler and key rewrap: the loops the clock moves.
    await eventually('every loop waits on the clock', () => clock.sleeping === 4);
  });
  after(() => stack.stop());

  it('makes one run per tick of a 6-field schedule every 2 s across both replicas', async () => {
    const t = tenant();
    const k = newKey('openai');
    stack.fake.script(k, []);
    await stack.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0 }, t.call);
    await stack.client.call(S.putAgentConfig, { blueprint: 'task-triage', schedule: '*/2 * * * * *' }, t.call);
    const first = Math.ceil(clock.now().getTime() / 2_000) * 2_000;
    for (let i = 0; i < 3; i++) await clock.advance(2_000);
    await stack.client.call(S.putAgentConfig, { blueprint: 'task-triage' }, t.call); // stop the schedule
    const { rows } = await stack.db.query(
      `SELECT scheduled_for FROM agent_runs WHERE tenant_id = $1 ORDER BY scheduled_for`,
      [t.id],
    );
    assert.deepEqual(
      rows.map((r) => (r.scheduled_for as Date).getTime()),
      [first, first + 2_000, first + 4_000],
      'one run per tick, none skipped, none twice',
    );
    await eventually('the scheduled runs succeed', async () => {
      const r = await stack.db.query(
        `SELECT count(*)::int AS n FROM agent_runs WHERE tenant_id = $1 AND status = 'succeeded'`,
        [t.id],
      );
      return r.rows[0].n === rows.length;
    });
  });

  it('runs only the latest missed tick after downtime', async () => {
    const t = tenant();
    await stack.client.call(S.putAgentConfig, { blueprint: 'pipeline-review', schedule: '@yearly' }, t.call);
    // The scheduler wakes up in mid-2031 (the configs' next tick was 1 January 2027): four ticks missed.
    assert.equal(await scheduleDueRuns(stack.db as never, new Date('2031-06-01T00:00:00Z')), 1);
    const { rows } = await stack.db.query(`SELECT scheduled_for, run_at FROM agent_runs WHERE tenant_id = $1`, [t.id]);
    assert.deepEqual(rows, [
      { scheduled_for: new Date('2031-01-01T00:00:00Z'), run_at: new Date('2031-01-01T00:00:00Z') },
    ]);
    const next = await stack.db.query(`SELECT schedule_next_at FROM agent_configs WHERE tenant_id = $1`, [t.id]);
    assert.deepEqual(next.rows[0].schedule_next_at, new Date('2032-01-01T00:00:00Z'));
    assert.equal(await scheduleDueRuns(stack.db as never, new Date('2031-06-01T00:00:00Z')), 0, 'the tick runs once');
  });

  it('pauses the schedule after 5 failed runs in a row; the next PUT resumes it', async () => {
    const t = tenant();
    const k = newKey('openai');
    stack.fake.script(
      k,
      Array.from({ length: 50 }, () => ({ error: 500 as const })),
    );
    await stack.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0 }, t.call);
    await stack.client.call(S.putAgentConfig, { blueprint: 'task-triage', schedule: '* * * * * *' }, t.call);
    const count = async (status?: string) =>
      (
        await stack.db.query(
          `SELECT count(*)::int AS n FROM agent_runs WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)`,
          [t.id, status ?? null],
        )
      ).rows[0].n as number;
    // One tick at a time, each run failed before the next tick.
    for (let i = 1; i <= 5; i++) {
      await clock.advance(1_000);
      await eventually(`run ${i} failed`, async () => (await count('failed')) === i, 20_000, 50);
    }
    const disabled = await stack.db.query(`SELECT disable_reason FROM agent_configs WHERE tenant_id = $1`, [t.id]);
    assert.notEqual(disabled.rows[0].disable_reason, null, 'paused');
    const failed = await stack.db.query(
      `SELECT consecutive_failures FROM agent_runs WHERE tenant_id = $1 AND status = 'failed' ORDER BY finished_at`,
      [t.id],
    );
    assert.deepEqual(
      failed.rows.map((r) => r.consecutive_failures),
      [1, 2, 3, 4, 5],
    );
    for (let i = 0; i < 3; i++) await clock.advance(1_000);
    assert.equal(await count(), 5, 'no run while paused');
    const resumed = await stack.client.call(
      S.putAgentConfig,
      { blueprint: 'task-triage', schedule: '* * * * * *' },
      t.call,
    );
    assert.equal(resumed.schedule, '* * * * * *');
    await clock.advance(1_000);
    assert.equal(await count(), 6, 'runs again at the first tick after the PUT');
    await stack.client.call(S.putAgentConfig, { blueprint: 'task-triage' }, t.call);
  });
});

describe('runs while the apps service is away', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  before(async () => {
    const port = await freePort(); // nothing listens there
    stack = await startRunStack({ config: { downstreams: { apps: `127.0.0.1:${port}` } } });
  });
  after(() => stack.stop());

  it('go on with the built-in tools; an app tool the model names anyway is an unknown tool', async () => {
    const t = tenant();
    const k = newKey('openai');
    stack.fake.script(k, [{ tools: [{ name: 'crm__lookup', arguments: {} }] }, { text: 'done without apps' }]);
    await stack.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: k, provider: 0 }, t.call);
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'go' }, t.call);
    let last = run;
    await eventually(
      'the run ends',
      async () => {
        last = await stack.client.call(S.getAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
        return (
          last.status === AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED ||
          last.status === AgentRunStatus.AGENT_RUN_STATUS_FAILED
        );
      },
      20_000,
      50,
    );
    assert.equal(last.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, last.failure_detail);
    assert.deepEqual(last.output?.tool_calls, [{ name: 'crm__lookup', is_error: true }]);
    const offered = JSON.parse(stack.fake.chats(k)[0]!.body).tools.map(
      (x: { function: { name: string } }) => x.function.name,
    );
    assert.deepEqual(offered, ['list_tasks', 'create_task', 'search_notes']);
  });
});
