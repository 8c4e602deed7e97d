/**
 * A run's live events through the gateway with a real SSE client (the `eventsource` package), while
 * the run executes on another agents replica than the one serving the stream: the stack's agents
 * process runs every run; two more agents processes on the same database (no run slots) serve
 * streams, each behind a gateway of its own.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { EventSource } from 'eventsource';
import { createAgentsService, type AgentsService } from '@workauto/agents';
import { FakeProvider, fakeProviderSettings, type ChatStep } from '@workauto/agents/testing';
import { Keyring } from '@workauto/crypto';
import { createGateway, type Gateway } from '@workauto/gateway';
import { generateCallerKeys } from '@workauto/grpc';
import { createLogger } from '@workauto/logger';
import { eventually } from '@workauto/testing';
import { assertError, ok, startTestStack, type TenantFixture, type TestStack, E2E_DEADLINE_MS } from './harness.js';

interface Received {
  id: number;
  type: string;
  data: any;
  /** Date.now() when the client's EventSource dispatched it. */
  at: number;
}

describe('agent run events through the gateway, served by another replica', () => {
  const encryptionKeys = Keyring.generateSpec();
  const callerKeys = generateCallerKeys('gateway');
  const silent = createLogger('viewer', 'silent');
  let stack: TestStack;
  let fake: FakeProvider;
  let a: TenantFixture;
  let b: TenantFixture;
  /** Streams end after 2 s (clients reconnect); heartbeat beyond the test, so only notifications wake them. */
  let short: { replica: AgentsService; url: string };
  /** Streams last; a heartbeat every 300 ms. */
  let long: { replica: AgentsService; url: string };
  const closers: (() => Promise<void>)[] = [];

  const triage = { params: { path: { blueprint: 'task-triage' } } };
  const ofRun = (id: string) => ({ params: { path: { blueprint: 'task-triage', id } } });
  /** A run of tenant A's task-triage agent; `run_at` schedules it. */
  const startRun = (input: string, run_at?: string) =>
    ok(stack.client(a.key).POST('/api/v1/agents/{blueprint}/runs', { ...triage, body: { input, run_at } }), 201);
  const getRun = async (id: string) => ok(stack.client(a.key).GET('/api/v1/agents/{blueprint}/runs/{id}', ofRun(id)));

  /** An agents process on the stack's agents database that serves streams and runs nothing, behind a gateway of its own. */
  async function viewer(runEvents: { heartbeatMs: number; maxStreamMs?: number }) {
    const replica = await createAgentsService(
      {
        databaseUrl: stack.databaseUrl('agents'),
        host: '127.0.0.1',
        port: 0,
        transport: stack.transport,
        callerVerifyKeys: callerKeys.verifyKeys,
        encryptionKeys,
        runs: { concurrency: 0 },
        runEvents,
      },
      silent,
    );
    const downstreams = Object.fromEntries(
      Object.entries(stack.services).map(([name, s]) => [name, `127.0.0.1:${s.port}`]),
    );
    const gateway: Gateway = await createGateway({
      logger: silent,
      databaseUrl: stack.databaseUrl('gateway'),
      encryptionKeys,
      deadlineMs: E2E_DEADLINE_MS,
      callerSigningKey: callerKeys.signingKey,
      downstreams: { ...downstreams, agents: `127.0.0.1:${replica.port}` },
    });
    const port = await gateway.listen('127.0.0.1', 0);
    closers.push(
      () => gateway.close(),
      () => replica.stop(),
    );
    return { replica, url: `http://127.0.0.1:${port}` };
  }

  before(async () => {
    fake = await FakeProvider.start();
    stack = await startTestStack({
      encryptionKeys,
      callerKeys,
      agents: {
        providers: fakeProviderSettings(fake),
        runs: { heartbeatMs: 200, pollMs: 50, schedulerPollMs: 200 },
      },
    });
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
    short = await viewer({ heartbeatMs: 60_000, maxStreamMs: 2_000 });
    long = await viewer({ heartbeatMs: 300 });
  });
  after(async () => {
    for (const close of closers.reverse()) await close();
    await stack?.stop();
    await fake?.stop();
  });

  /** Tenant A's task-triage runs answer as `steps` (their key is new, with a fresh script). */
  async function script(steps: ChatStep[]) {
    const k = `sk-${randomUUID().replace(/-/g, '')}${randomUUID().replace(/-/g, '')}`;
    fake.script(k, steps);
    await ok(
      stack
        .client(a.key)
        .PUT('/api/v1/agent-configs/{blueprint}/byok-key', { ...triage, body: { api_key: k, provider: 'openai' } }),
    );
  }

  /** An EventSource on a run's events through `base`, with tenant A's key; what it receives, and how it ended. */
  function watch(base: string, runId: string) {
    const received: Received[] = [];
    let opens = 0;
    const es = new EventSource(`${base}/api/v1/agents/task-triage/runs/${runId}/events`, {
      fetch: (url, init) => fetch(url, { ...init, headers: { ...init.headers, Authorization: `Bearer ${a.key}` } }),
    });
    es.addEventListener('open', () => opens++);
    for (const type of ['step', 'status'])
      es.addEventListener(type, (e) =>
        received.push({ id: Number(e.lastEventId), type, data: JSON.parse(e.data), at: Date.now() }),
      );
    // After the terminal status the stream ends; the EventSource reconnects with its Last-Event-ID,
    // gets a 204 and stops for good.
    const stopped = new Promise<number | undefined>((resolve) =>
      es.addEventListener('error', (e) => {
        if (es.readyState === es.CLOSED) resolve(e.code);
      }),
    );
    return { es, received, opens: () => opens, stopped };
  }

  const isRunning = (e: Received) => e.type === 'status' && e.data.status === 'running';

  it('EventSource: every status and step once and in order across reconnects (Last-Event-ID), as GET shows them; ends at the terminal status', async () => {
    const gate = Promise.withResolvers<void>();
    await script([
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
    const run = await startRun('go');
    const watcher = watch(short.url, run.id);
    try {
      // The run waits at its first model call until the client saw it running and its first
      // stream ended (2 s) and it reconnected: what follows reaches it on a resumed stream.
      await eventually(
        'running, then a reconnect',
        () => watcher.received.some(isRunning) && watcher.opens() >= 2,
        20_000,
      );
      gate.resolve();
      assert.equal(await watcher.stopped, 204, 'resumed after the terminal status: 204, and the EventSource stops');
    } finally {
      watcher.es.close();
    }
    const got = watcher.received;
    assert.deepEqual(
      got.map((e) => e.id),
      got.map((_, i) => i + 1),
      'ids 1, 2, 3, … each once',
    );
    assert.deepEqual(
      got.map((e) => (e.type === 'status' ? e.data.status : `${e.data.type}:${e.data.tool_name ?? ''}`)),
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
    const steps = (await ok(stack.client(a.key).GET('/api/v1/agents/{blueprint}/runs/{id}/steps', ofRun(run.id)))).data;
    assert.deepEqual(
      got.filter((e) => e.type === 'step').map((e) => e.data),
      steps,
      'each step exactly as the steps endpoint returns it',
    );
    assert.deepEqual(got.at(-1)!.data, await getRun(run.id));
  });

  it('through the gateway: unbuffered text/event-stream with heartbeats, resumed by the Last-Event-ID header or the query, JSON errors before the first event, ended on the replica when the client goes', async () => {
    await script([{ text: 'ok' }]);
    const done = await startRun('go');
    await eventually('the run ends', async () => (await getRun(done.id)).status === 'succeeded');
    const events = (path: string, headers: Record<string, string> = {}, key = a.key) =>
      fetch(`${long.url}/api/v1/agents/task-triage/runs/${path}`, {
        headers: { authorization: `Bearer ${key}`, ...headers },
      });
    const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

    // A finished run: replayed and ended at once; resumed from the header, or the query, which wins.
    const all = await events(`${done.id}/events`);
    assert.equal(all.status, 200);
    assert.deepEqual(ids(await all.text()), [1, 2, 3, 4]);
    assert.deepEqual(ids(await (await events(`${done.id}/events`, { 'Last-Event-ID': '2' })).text()), [3, 4]);
    assert.deepEqual(
      ids(await (await events(`${done.id}/events?last_event_id=1`, { 'Last-Event-ID': '3' })).text()),
      [2, 3, 4],
    );
    const over = await events(`${done.id}/events`, { 'Last-Event-ID': '4' });
    assert.deepEqual([over.status, await over.text()], [204, '']);

    // Errors before the first event are the API's JSON errors.
    const asJson = async (res: Response) => ({
      status: res.status,
      headers: res.headers,
      body: await res.json(),
    });
    assertError(await asJson(await events(`${done.id}/events`, {}, '')), 401);
    assertError(await asJson(await events(`${done.id}/events`, {}, b.key)), 404, 'AGENT_RUN_NOT_FOUND');
    const notNumber = await asJson(await events(`${done.id}/events`, { 'Last-Event-ID': 'abc' }));
    assertError(notNumber, 400);
    assert.match(notNumber.body.error.message, /last_event_id/);
    const past = await asJson(await events(`${done.id}/events`, { 'Last-Event-ID': '9' }));
    assertError(past, 400);
    assert.match(past.body.error.message, /past this run's last event \(4\)/);

    // A run that stays queued: the stream stays open, each heartbeat arriving as it is written.
    const later = await startRun('later', new Date(Date.now() + 3_600_000).toISOString());
    const gone = new AbortController();
    const res = await fetch(`${long.url}/api/v1/agents/task-triage/runs/${later.id}/events`, {
      headers: { authorization: `Bearer ${a.key}`, 'accept-encoding': 'gzip, br' },
      signal: gone.signal,
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('x-accel-buffering'), 'no');
    assert.equal(res.headers.get('content-encoding'), null, 'never compressed');
    const reader = res.body!.getReader();
    let text = '';
    while ((text.match(/^: heartbeat$/gm) ?? []).length < 2) {
      const { value, done: ended } = await reader.read();
      assert.equal(ended, false, `the stream stays open: ${text}`);
      text += Buffer.from(value).toString('utf8');
    }
    assert.match(text, /^retry: 1000\n\nid: 1\nevent: status\ndata: \{.*"status":"queued"/);
    assert.equal(long.replica.openEventStreams(), 1);
    gone.abort();
    // Its streams last minutes: only the gateway cancelling the call ends this one now.
    await eventually('the replica ends the stream', () => long.replica.openEventStreams() === 0);
  });

  it('ends an open stream with an `event: error` once its key is revoked, its member deactivated or its read on agents taken away', async (t) => {
    const owner = stack.client(a.key);
    const later = await startRun('stays queued', new Date(Date.now() + 3_600_000).toISOString());
    const member = async () => {
      const inv = await ok(
        owner.POST('/api/v1/invitations', { body: { email: `m-${randomUUID()}@alpha.test`, role: 'member' } }),
        201,
      );
      const claimed = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
      return { key: claimed.api_key, id: claimed.member!.id };
    };
    const cases: [string, (m: { key: string; id: string }) => Promise<{ response: Response }>, number][] = [
      [
        'its key revoked',
        async (m) => {
          const keys = await ok(owner.GET('/api/v1/api-keys', { params: { query: { member_id: m.id } } }));
          return owner.DELETE('/api/v1/api-keys/{id}', { params: { path: { id: keys.data[0]!.id } } });
        },
        401,
      ],
      ['its member deactivated', (m) => owner.DELETE('/api/v1/members/{id}', { params: { path: { id: m.id } } }), 401],
      [
        'its read on agents taken away',
        (m) =>
          owner.PUT('/api/v1/members/{member_id}/access-policies', {
            params: { path: { member_id: m.id } },
            body: { policies: [{ domain: 'agents', access_level: 'none' }] },
          }),
        403,
      ],
    ];
    // Through the replica whose streams carry a heartbeat every 300 ms: how long a stream stays open
    // after the change is counted in its own heartbeats, on the server's clock, not the test's. Its
    // gateway checks open streams' credentials every 2 s, and the stream ends within 5 s
    // (docs/operations.md, "Fairness between tenants"): within 17 heartbeats.
    const HEARTBEATS_BOUND = Math.ceil(5_000 / 300);
    await Promise.all(
      cases.map(async ([what, change, status]) => {
        const m = await member();
        // Raw: a Server-Sent Events stream, read as it arrives.
        const res = await fetch(`${long.url}/api/v1/agents/task-triage/runs/${later.id}/events`, {
          headers: { authorization: `Bearer ${m.key}` },
        });
        assert.equal(res.status, 200, what);
        const reader = res.body!.getReader();
        let text = '';
        while (!/^id: 1$/m.test(text)) text += Buffer.from((await reader.read()).value!).toString('utf8');
        const changed = await change(m);
        assert.ok([200, 204].includes(changed.response.status), `${what}: ${changed.response.status}`);
        const before = text.length;
        const heartbeatsSince = () => (text.slice(before).match(/^: heartbeat$/gm) ?? []).length;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          text += Buffer.from(value).toString('utf8');
          assert.ok(
            heartbeatsSince() <= HEARTBEATS_BOUND,
            `${what}: the stream is still open ${heartbeatsSince()} heartbeats after the change`,
          );
        }
        t.diagnostic(`stream ended ${heartbeatsSince()} heartbeats (300 ms each) after ${what}`);
        await reader.cancel().catch(() => undefined);
        const last = /event: error\ndata: (.*)\n\n$/.exec(text);
        assert.ok(last, `${what}: the stream's last message is an error event: ${text.slice(-300)}`);
        const error = JSON.parse(last[1]!).error;
        assert.equal(error.code, status, `${what}: ${last[1]}`);
      }),
    );
  });

  it('100 steps across replicas reach the client in order; the delay from a step’s end to its event', async (t) => {
    // 9 answers of 10 tool calls each (list_tasks on the real notes-tasks), then a final answer: 100 steps.
    const calls = Array.from({ length: 10 }, () => ({ name: 'list_tasks', arguments: {} }));
    await script([...Array.from({ length: 9 }, () => ({ tools: calls })), { text: 'Reviewed.' }]);
    const run = await startRun('go');
    const watcher = watch(long.url, run.id);
    try {
      assert.equal(await watcher.stopped, 204);
    } finally {
      watcher.es.close();
    }
    const steps = watcher.received.filter((e) => e.type === 'step');
    assert.deepEqual(
      steps.map((e) => e.data.index),
      Array.from({ length: 100 }, (_, i) => i),
    );
    assert.equal(watcher.received.at(-1)!.data.status, 'succeeded');
    // ended_at is set as the step's transaction begins, so the delay includes its insert and commit.
    const delays = steps.map((e) => e.at - Date.parse(e.data.ended_at)).sort((x, y) => x - y);
    const pct = (p: number) => delays[Math.min(delays.length - 1, Math.ceil((p / 100) * delays.length) - 1)]!;
    const line = `run events across replicas, step end → client, 100 steps: p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${delays.at(-1)} ms`;
    t.diagnostic(line);
    console.log(line);
  });
});
