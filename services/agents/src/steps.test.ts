/**
 * A run's steps over real gRPC and PostgreSQL: written as the run goes, in order, cut to 4 KiB,
 * never holding the provider key; each step and status change NOTIFYs the run's channel in its
 * transaction. Plus the pure rules that cut and clean a step's texts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { eventually } from '@workauto/testing';
import { AgentRunStatus, Provider, StepType } from '@workauto/protos/workauto/agents/v1/agents.js';
import { NotesTasksServiceService as Notes } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { cutUtf8, redact, stepArguments, STEP_TEXT_MAX_BYTES } from './domain/steps.js';
import { RUN_CHANNEL } from './repo/runs.js';
import { S, failure, newKey, runUntilDone as runUntil, startRunStack, tenant } from './test-support.js';
import type { ChatStep } from './testing/fake-provider.js';

describe('step texts', () => {
  it('cuts to 4 KiB of UTF-8, never inside a character', () => {
    const text = `${'a'.repeat(STEP_TEXT_MAX_BYTES - 1)}é and more`;
    const cut = cutUtf8(text);
    assert.equal(cut, 'a'.repeat(STEP_TEXT_MAX_BYTES - 1), 'the 2-byte é does not fit in the last byte');
    assert.equal(cutUtf8('short'), 'short');
  });

  it('blanks a secret out as it is and as JSON escapes it; arguments over 4 KiB become their cut JSON', () => {
    const key = 'sk-"quoted\\key-0123456789';
    assert.equal(redact(`say ${key}`, [key]), 'say [redacted]');
    const args = stepArguments({ note: `the key is ${key}` }, [key]);
    assert.deepEqual(args, { note: 'the key is [redacted]' });
    const big = stepArguments({ body: 'x'.repeat(10_000) }, [key]);
    assert.equal(typeof big, 'string');
    assert.equal(Buffer.byteLength(big as string), STEP_TEXT_MAX_BYTES);
    assert.ok((big as string).startsWith('{"body":"xxx'));
  });
});

describe('agent run steps', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  let listener: pg.Client;
  const notifications: { run_id: string; tenant_id: string; change: string; status?: string; index?: number }[] = [];
  before(async () => {
    stack = await startRunStack();
    listener = new pg.Client({ connectionString: stack.databaseUrl });
    await listener.connect();
    listener.on('notification', (n) => {
      if (n.channel === RUN_CHANNEL) notifications.push(JSON.parse(n.payload!));
    });
    await listener.query(`LISTEN ${RUN_CHANNEL}`);
  });
  after(async () => {
    await listener?.end();
    await stack?.stop();
  });

  async function tenantWithKey(steps: ChatStep[], guardrails: unknown[] = []) {
    const t = tenant();
    const k = newKey('openai');
    stack.fake.script(k, steps);
    await stack.client.call(S.putAgentConfig, { blueprint: 'task-triage', guardrails }, t.call);
    await stack.client.call(
      S.putByokKey,
      { blueprint: 'task-triage', api_key: k, provider: Provider.PROVIDER_OPENAI },
      t.call,
    );
    return { ...t, key: k };
  }

  const runUntilDone = (t: ReturnType<typeof tenant>) => runUntil(stack.client, t, 'task-triage');

  it('lists every model call and tool call in order, with arguments, results, tokens and exact cost', async () => {
    const t = await tenantWithKey([
      {
        tools: [
          { name: 'create_task', arguments: { title: 'Call ACME' } },
          { name: 'create_task', arguments: { title: '' } },
        ],
        usage: { input: 1_000, output: 100 },
      },
      { tools: [{ name: 'no_such_tool', arguments: { x: 1 } }], usage: { input: 2_000, output: 50 } },
      { text: 'Created one task.', usage: { input: 3_000, output: 10 } },
    ]);
    const run = await runUntilDone(t);
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    const { data: steps } = await stack.client.call(
      S.listAgentRunSteps,
      { blueprint: 'task-triage', id: run.id },
      t.call,
    );
    assert.deepEqual(
      steps.map((s) => [s.index, s.type, s.tool_name ?? null, s.is_error ?? null]),
      [
        [0, StepType.STEP_TYPE_MODEL_CALL, null, null],
        [1, StepType.STEP_TYPE_TOOL_CALL, 'create_task', false],
        [2, StepType.STEP_TYPE_TOOL_CALL, 'create_task', true],
        [3, StepType.STEP_TYPE_MODEL_CALL, null, null],
        [4, StepType.STEP_TYPE_TOOL_CALL, 'no_such_tool', true],
        [5, StepType.STEP_TYPE_MODEL_CALL, null, null],
      ],
    );
    const [first, created, refused, , unknown, last] = steps;
    assert.deepEqual(
      [first!.input_tokens, first!.output_tokens, first!.cost_usd_cents],
      [1_000, 100, 0.056],
      'gpt-4.1-mini: 1,000 × 40 + 100 × 160 millionths of a cent',
    );
    assert.deepEqual(created!.arguments, { title: 'Call ACME' });
    const task = (await stack.notesClient.call(Notes.listTasks, {}, t.call)).data[0]!;
    assert.equal(JSON.parse(created!.result!).id, task.id, 'the result the model got: the task as the API shows it');
    assert.match(refused!.result!, /title/);
    assert.match(unknown!.result!, /unknown tool no_such_tool/);
    assert.equal(last!.result, 'Created one task.');
    assert.equal(created!.input_tokens, undefined);
    for (const s of steps) assert.ok(s.started_at! <= s.ended_at!, `step ${s.index} ends after it starts`);
    for (let i = 1; i < steps.length; i++) assert.ok(steps[i - 1]!.ended_at! <= steps[i]!.started_at!);

    // Read needs only the run: another tenant's, another blueprint's path or a bad id are refused.
    const other = await failure(
      stack.client.call(S.listAgentRunSteps, { blueprint: 'task-triage', id: run.id }, tenant().call),
    );
    assert.equal(other.code, grpc.status.NOT_FOUND);
    assert.equal(other.reason, 'AGENT_RUN_NOT_FOUND');
    assert.equal(
      (await failure(stack.client.call(S.listAgentRunSteps, { blueprint: 'daily-briefing', id: run.id }, t.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.equal(
      (await failure(stack.client.call(S.listAgentRunSteps, { blueprint: 'task-triage', id: 'nope' }, t.call))).code,
      grpc.status.INVALID_ARGUMENT,
    );
  });

  it('NOTIFYs every status change and every step on the run channel, in order, with the run and tenant', async () => {
    const t = await tenantWithKey([{ tools: [{ name: 'list_tasks', arguments: {} }] }, { text: 'Nothing to do.' }]);
    const run = await runUntilDone(t);
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_SUCCEEDED, run.failure_detail);
    const ofRun = () => notifications.filter((n) => n.run_id === run.id);
    await eventually('the last notification', () => ofRun().some((n) => n.status === 'succeeded'));
    assert.deepEqual(
      ofRun().map((n) => (n.change === 'status' ? `status ${n.status}` : `step ${n.index}`)),
      ['status queued', 'status running', 'step 0', 'step 1', 'step 2', 'status succeeded'],
    );
    assert.ok(ofRun().every((n) => n.tenant_id === t.id));

    const later = await stack.client.call(
      S.createAgentRun,
      { blueprint: 'task-triage', run_at: new Date(Date.now() + 3_600_000) },
      t.call,
    );
    await stack.client.call(S.cancelAgentRun, { blueprint: 'task-triage', id: later.id }, t.call);
    await eventually('the cancel notification', () =>
      notifications.some((n) => n.run_id === later.id && n.status === 'cancelled'),
    );
  });

  it('cuts a large result to 4 KiB: the start of what the model received', async () => {
    const t = await tenantWithKey([{ tools: [{ name: 'list_tasks', arguments: {} }] }, { text: 'Many tasks.' }]);
    for (let i = 0; i < 30; i++)
      await stack.notesClient.call(Notes.createTask, { title: `Task ${i} ${'é'.repeat(200)}` }, t.call);
    const run = await runUntilDone(t);
    const { data: steps } = await stack.client.call(
      S.listAgentRunSteps,
      { blueprint: 'task-triage', id: run.id },
      t.call,
    );
    const listed = steps[1]!;
    assert.ok(Buffer.byteLength(listed.result!) <= STEP_TEXT_MAX_BYTES);
    assert.ok(Buffer.byteLength(listed.result!) > STEP_TEXT_MAX_BYTES - 4, 'cut at the limit, not before');
    const sent = JSON.parse(stack.fake.chats(t.key)[1]!.body);
    const received: string = sent.messages.find((m: { role: string }) => m.role === 'tool').content;
    assert.ok(Buffer.byteLength(received) > 10_000);
    assert.ok(received.startsWith(listed.result!));
  });

  it('never keeps the provider key in a step, whatever the model repeats; a blocked answer is withheld from its step', async () => {
    const t = tenant();
    const k = newKey('openai');
    stack.fake.script(k, [
      { text: `thinking about ${k}`, tools: [{ name: 'create_task', arguments: { title: `key ${k}` } }] },
      { text: `the key is ${k} and the code is SECRET-42` },
    ]);
    await stack.client.call(
      S.putAgentConfig,
      { blueprint: 'task-triage', guardrails: [{ type: 'block_pattern', pattern: 'SECRET-\\d+' }] },
      t.call,
    );
    await stack.client.call(
      S.putByokKey,
      { blueprint: 'task-triage', api_key: k, provider: Provider.PROVIDER_OPENAI },
      t.call,
    );
    const run = await runUntilDone(t);
    assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_FAILED);
    const { data: steps } = await stack.client.call(
      S.listAgentRunSteps,
      { blueprint: 'task-triage', id: run.id },
      t.call,
    );
    assert.equal(steps.length, 3);
    assert.equal(steps[0]!.result, 'thinking about [redacted]');
    assert.deepEqual(steps[1]!.arguments, { title: 'key [redacted]' });
    assert.ok(!steps[1]!.result!.includes(k), 'the created task echoes the title: blanked out too');
    assert.equal(steps[2]!.result, undefined, 'the blocked answer is not in its step');
    assert.ok(!JSON.stringify(steps).includes(k));
    assert.ok(!JSON.stringify(steps).includes('SECRET-42'));
    const { rows } = await stack.db.query(`SELECT s::text AS row FROM agent_run_steps s WHERE run_id = $1`, [run.id]);
    assert.equal(rows.length, 3);
    for (const r of rows) assert.ok(!r.row.includes(k), 'no column holds the key');
  });
});
