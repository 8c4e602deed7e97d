/**
 * A run's live events over real gRPC and PostgreSQL, served by a replica that does not run it: two
 * agents processes-in-process on one database, the one serving streams with no run slots. Each
 * step and status change reaches the stream through that replica's LISTEN connection (the
 * heartbeat, its fallback, is set far beyond the test), in one id sequence that resumes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { eventually } from '@workauto/testing';
import { resourceJson } from '@workauto/protos';
import {
  AgentRun,
  AgentRunStep,
  Provider,
  type StreamAgentRunEventsRequest,
} from '@workauto/protos/workauto/agents/v1/agents.js';
import { S, failure, newKey, runUntilDone, startAgents, startRunStack, tenant } from './test-support.js';
import type { ChatStep } from './testing/fake-provider.js';

/** A message as the REST API renders it (the gateway's JSON mapping). */

interface SseEvent {
  id: number;
  event: string;
  /** The JSON of a status event (the run) or a step event: the fields the tests read. */
  data: {
    status?: string;
    type?: string;
    tool_name?: string;
    cost_usd_cents?: unknown;
    output?: { text?: string } | null;
  };
}

/** The stream's text as a client reads it: events (id, type, JSON data) and comments, in order. */
function parse(text: string): { events: SseEvent[]; comments: string[]; retry?: number } {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let retry: number | undefined;
  for (const block of text.split('\n\n')) {
    if (!block) continue;
    const fields: Record<string, string> = {};
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) comments.push(line.slice(1).trim());
      else {
        const at = line.indexOf(': ');
        fields[line.slice(0, at)] = line.slice(at + 2);
      }
    }
    if (fields.retry) retry = Number(fields.retry);
    if (fields.data !== undefined)
      events.push({ id: Number(fields.id), event: fields.event!, data: JSON.parse(fields.data) });
  }
  return { events, comments, ...(retry === undefined ? {} : { retry }) };
}

describe('agent run events (Server-Sent Events)', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  /** The replica that serves streams: no run slots, so every run runs on stack's replica. */
  let viewer: Awaited<ReturnType<typeof startAgents>>;

  before(async () => {
    stack = await startRunStack();
    viewer = await startAgents({
      databaseUrl: stack.databaseUrl,
      fake: stack.fake,
      config: {
        ...stack.config,
        runs: { ...stack.config.runs, concurrency: 0 },
        // Far beyond the test: only a notification can wake a stream in time.
        runEvents: { heartbeatMs: 60_000 },
      },
    });
  });
  after(async () => {
    await viewer?.stop();
    await stack?.stop();
  });

  async function tenantWithScript(steps: ChatStep[]) {
    const t = tenant();
    const k = newKey('openai');
    stack.fake.script(k, steps);
    await stack.client.call(
      S.putByokKey,
      { blueprint: 'task-triage', api_key: k, provider: Provider.PROVIDER_OPENAI },
      t.call,
    );
    return t;
  }

  /** Reads a stream to its end (or until `until` says stop, then cancels it): its text, chunk by chunk. */
  async function read(
    req: StreamAgentRunEventsRequest,
    t: ReturnType<typeof tenant>,
    opts: { client?: typeof viewer.client; until?: (text: string) => boolean; onChunk?: (text: string) => void } = {},
  ): Promise<{ text: string; chunks: number }> {
    const stop = new AbortController();
    let text = '';
    let chunks = 0;
    try {
      for await (const chunk of (opts.client ?? viewer.client).stream(S.streamAgentRunEvents, req, {
        ...t.call,
        signal: stop.signal,
      })) {
        assert.equal(chunk.content_type, 'text/event-stream; charset=utf-8');
        text += Buffer.from(chunk.data).toString('utf8');
        chunks++;
        opts.onChunk?.(text);
        if (opts.until?.(text)) {
          stop.abort();
          break;
        }
      }
    } catch (err) {
      if (!stop.signal.aborted) throw err;
    }
    return { text, chunks };
  }

  it('streams each status and step from another replica, in one id sequence, as GET shows them, and ends after the terminal status', async () => {
    const gate = Promise.withResolvers<void>();
    const t = await tenantWithScript([
      {
        gate: gate.promise,
        then: {
          tools: [
            { name: 'create_task', arguments: { title: 'Call ACME' } },
            { name: 'no_such_tool', arguments: {} },
          ],
        },
      },
      { text: 'Done.' },
    ]);
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'go' }, t.call);
    let openedGate = false;
    const { text } = await read({ blueprint: 'task-triage', id: run.id }, t, {
      // The run waits at its first model call until this stream has seen it running: every step
      // after that reaches it live.
      onChunk: (sofar) => {
        if (!openedGate && parse(sofar).events.some((e) => e.event === 'status' && e.data.status === 'running')) {
          openedGate = true;
          gate.resolve();
        }
      },
    });
    const { events, retry } = parse(text);
    assert.equal(retry, 1_000, 'the stream starts by telling the client how soon to reconnect');
    assert.deepEqual(
      events.map((e) => e.id),
      events.map((_, i) => i + 1),
      'ids: 1, 2, 3, … across steps and statuses',
    );
    assert.deepEqual(
      events.map((e) => (e.event === 'status' ? e.data.status : `${e.data.type}:${e.data.tool_name ?? ''}`)),
      [
        'queued',
        'running',
        'model_call:',
        'tool_call:create_task',
        'tool_call:no_such_tool',
        'model_call:',
        'succeeded',
      ],
    );
    // Data: exactly the JSON the steps endpoint and GET return.
    const { data: steps } = await stack.client.call(
      S.listAgentRunSteps,
      { blueprint: 'task-triage', id: run.id },
      t.call,
    );
    assert.deepEqual(
      events.filter((e) => e.event === 'step').map((e) => e.data),
      steps.map((s) => resourceJson(AgentRunStep, s)),
    );
    const final = await stack.client.call(S.getAgentRun, { blueprint: 'task-triage', id: run.id }, t.call);
    assert.deepEqual(events.at(-1)!.data, resourceJson(AgentRun, final));
    // Each status event is the run as it was then.
    assert.deepEqual(
      [events[1]!.data.cost_usd_cents, events[1]!.data.output ?? null],
      [0, null],
      'running: no cost, no output yet',
    );
    assert.ok(final.cost_usd_cents > 0);
    assert.equal(events.at(-1)!.data.output?.text, 'Done.');
    assert.equal(viewer.service.openEventStreams(), 0, 'the stream ended with the run');

    // Resumed after any id: exactly the events after it (one Last-Event-ID for both kinds).
    for (const k of [0, 2, 3, 6]) {
      const resumed = parse((await read({ blueprint: 'task-triage', id: run.id, last_event_id: k }, t)).text);
      assert.deepEqual(resumed.events, events.slice(k), `after id ${k}`);
    }
    // Resumed after its last event: no stream at all (the gateway answers 204, and EventSource stops).
    const done = await read({ blueprint: 'task-triage', id: run.id, last_event_id: 7 }, t);
    assert.deepEqual(done, { text: '', chunks: 0 });
  });

  it('refuses another tenant’s run (404), an id past the last event or a negative one (400)', async () => {
    const t = await tenantWithScript([{ text: 'ok' }]);
    const run = await runUntilDone(stack.client, t, 'task-triage');
    const other = await failure(read({ blueprint: 'task-triage', id: run.id }, tenant()));
    assert.equal(other.code, grpc.status.NOT_FOUND);
    const blueprint = await failure(read({ blueprint: 'daily-briefing', id: run.id }, t));
    assert.equal(blueprint.code, grpc.status.NOT_FOUND);
    const past = await failure(read({ blueprint: 'task-triage', id: run.id, last_event_id: 99 }, t));
    assert.equal(past.code, grpc.status.INVALID_ARGUMENT);
    assert.match(past.message, /last_event_id.*99.*past this run's last event \(4\)/);
    const negative = await failure(read({ blueprint: 'task-triage', id: run.id, last_event_id: -1 }, t));
    assert.equal(negative.code, grpc.status.INVALID_ARGUMENT);
  });

  it('a quiet stream carries a heartbeat comment, ends at its longest duration, and frees its subscription when cancelled', async () => {
    const quiet = await startAgents({
      databaseUrl: stack.databaseUrl,
      fake: stack.fake,
      config: {
        ...stack.config,
        runs: { ...stack.config.runs, concurrency: 0 },
        runEvents: { heartbeatMs: 200, maxStreamMs: 1_500 },
      },
    });
    try {
      const t = await tenantWithScript([]);
      // Due in an hour: it stays queued, and its stream has nothing to say.
      const run = await stack.client.call(
        S.createAgentRun,
        { blueprint: 'task-triage', input: 'later', run_at: new Date(Date.now() + 3_600_000) },
        t.call,
      );
      const { text } = await read({ blueprint: 'task-triage', id: run.id }, t, { client: quiet.client });
      const { events, comments } = parse(text);
      assert.deepEqual(
        events.map((e) => e.data.status),
        ['queued'],
      );
      assert.ok(comments.filter((c) => c === 'heartbeat').length >= 2, text);
      assert.match(comments.at(-1)!, /longest duration \(1500 ms\); reconnect with Last-Event-ID/);

      // A client that goes away ends its stream on the replica (the gateway cancels the call).
      await read({ blueprint: 'task-triage', id: run.id }, t, {
        client: quiet.client,
        until: (sofar) => parse(sofar).events.length > 0,
      });
      await eventually('the cancelled stream unsubscribes', () => quiet.service.openEventStreams() === 0);

      // A replica that stops ends its streams with a comment rather than cutting them.
      const open = read({ blueprint: 'task-triage', id: run.id }, t, { client: quiet.client });
      await eventually('the stream is open', () => quiet.service.openEventStreams() === 1);
      await quiet.stop();
      assert.match(parse((await open).text).comments.at(-1)!, /shutting down; reconnect with Last-Event-ID/);
    } finally {
      await quiet.stop().catch(() => undefined);
    }
  });

  it('a run from before events were numbered streams its steps as 1..n and its status as n + 1, and goes on after them', async () => {
    const gate = Promise.withResolvers<void>();
    const t = await tenantWithScript([
      { tools: [{ name: 'no_such_tool', arguments: {} }] },
      { gate: gate.promise, then: { text: 'Done.' } },
    ]);
    const run = await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'go' }, t.call);
    await eventually('two steps written', async () => {
      const { data } = await stack.client.call(S.listAgentRunSteps, { blueprint: 'task-triage', id: run.id }, t.call);
      return data.length === 2;
    });
    // What migration 0006 found: no numbers and no status rows.
    await stack.db.query(`UPDATE agent_runs SET event_seq = NULL WHERE id = $1`, [run.id]);
    await stack.db.query(`UPDATE agent_run_steps SET event_id = NULL WHERE run_id = $1`, [run.id]);
    await stack.db.query(`DELETE FROM agent_run_status_events WHERE run_id = $1`, [run.id]);
    const before = parse(
      (await read({ blueprint: 'task-triage', id: run.id }, t, { until: (s) => parse(s).events.length === 3 })).text,
    );
    assert.deepEqual(
      before.events.map((e) => [e.id, e.event]),
      [
        [1, 'step'],
        [2, 'step'],
        [3, 'status'],
      ],
    );
    assert.equal(before.events[2]!.data.status, 'running');
    gate.resolve();
    const rest = parse((await read({ blueprint: 'task-triage', id: run.id, last_event_id: 3 }, t)).text);
    assert.deepEqual(
      rest.events.map((e) => [e.id, e.event, e.data.status ?? e.data.type]),
      [
        [4, 'step', 'model_call'],
        [5, 'status', 'succeeded'],
      ],
    );
  });
});
