/**
 * One tenant never slows or starves another. In the deployment shape (each service its own process,
 * as a cluster runs them), tenant A does the worst the API lets it: the worst tool glob and
 * block_pattern it can store on an agent config and runs that evaluate them, runs and direct calls
 * on an MCP tool that hangs, past the run cap, a tool whose result is several MB, and a large calendar
 * (hundreds of events with long descriptions) listed and fed over and over. Meanwhile tenant B's
 * ordinary requests are timed against the same requests while A is idle (windows of each, alternating),
 * and B starts a run.
 *
 * What is asserted: B's p99 stays within twice its idle p99 (with a floor, for a loaded 2-core
 * machine), B's run starts while A's runs hang on the tool, A's large listings and feed and its oversized tool result
 * get the answers the API promises (200), and A itself needs no restart: its ordinary requests
 * succeed afterwards.
 *
 * Then each attack of capacity isolation (docs/operations.md, "Fairness between tenants") in a
 * window of its own, a tenant at a time and within its documented limits: never-read feed
 * requests, parallel 100,000-entry audit exports read slowly (and never read), MCP tool calls at
 * its full rate, 300 event streams, a flood on one key past its limit, large note writes and
 * recurring series to 2999 at its full rate. In each window B's p99 stays within 2 × max(idle p99,
 * 200 ms), B gets no error, and the resident memory of the gateway and of the attacked service
 * comes back within 20 % of what it was before the window.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { databaseUrlFor } from '@workauto/db';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Keyring, generateToken } from '@workauto/crypto';
import { FakeProvider, hasToolResult } from '@workauto/agents/testing';
import { eventually } from '@workauto/testing';
import { startMcpServer, type McpTestServer } from '@workauto/apps/testing/mcp-servers';
import { startServiceProcesses, type ServiceProcesses } from '../processes.js';
import type { AttackSpec } from './noisy-attacker.js';

/** The glob's backtracking grows with the a's of the name it is tried on: a tool name A picks. */
const A_TOOL = 'a'.repeat(30);
/** Ten stars and no final match: a backtracking matcher tries every split of the a's between them. */
const WORST_GLOB = `${'*a'.repeat(10)}*b`;
/** Alternatives that overlap: a backtracking engine tries every way to split a run of a's. RE2 accepts it. */
const WORST_PATTERN = '^(a|aa)+$';
const BLOCKED_ANSWER = `${'a'.repeat(34)}!`;
/** A tool result of 6 MB (past the 1 MiB the apps service reads, and past the 4 MiB of one message). */
const BIG_RESULT = { content: [{ type: 'text' as const, text: 'x'.repeat(6 * 1024 * 1024) }] };
/** The hanging tool's calls, ended only when the test is done with them. */
const hangs: (() => void)[] = [];
const releaseHangs = () => {
  for (const end of hangs.splice(0)) end();
};

/**
 * The idle p99 the bound is taken from is at least this: on a 2-core machine running other test
 * files, B's idle p99 alone moves between about 30 and 140 ms. A tenant that freezes a service
 * (the defects this test guards against cost B seconds) is far past twice this.
 */
const IDLE_P99_FLOOR_MS = 200;

interface Sample {
  route: string;
  ms: number;
  status: number;
  /** An error's reason (TENANT_RATE_LIMITED…). */
  reason?: string;
}

/** An attack's window: B's samples while it ran, and the memory of the processes it aimed at. */
interface Attack {
  name: string;
  /** What the first window of this attack missed, when it was run a second time. */
  retried?: string[];
  /** B's samples in the window's idle moments. */
  quiet: Sample[];
  samples: Sample[];
  /** What each attacker got, by status. */
  answers: Record<string, Record<number, number>>;
  rss: { process: string; startMb: number; peakMb: number; endMb: number; settledMs: number }[];
}

/** Resident memory of a process, in MB (Linux). */
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/** The three windows of attacks. */
const STREAMS = '120 never-read feeds, 50 never-read and 4 slow 100,000-entry exports, 300 event streams';
const REQUESTS =
  'MCP tool calls at the full rate, MCP batches of 100 calls, a flood past the limit of one key (64 loops)';
const COSTS = 'notes of 100 KB with 16 KiB of metadata and daily series to 2999, each at the full rate';

const p99 = (samples: Sample[]) => {
  const sorted = samples.map((s) => s.ms).sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)]!;
};

/** The bounds a window missed: B's errors, B's p99 past 2 × max(its idle p99, 200 ms), memory not back within 20 %. */
function verdict(attack: Attack): string[] {
  const missed: string[] = [];
  const failed = attack.samples.filter((s) => s.status >= 400).map((s) => `${s.route} ${s.status} ${s.reason}`);
  if (failed.length) missed.push(`B's requests failed: ${[...new Set(failed)].join(', ')}`);
  const bound = 2 * Math.max(p99(attack.quiet), IDLE_P99_FLOOR_MS);
  if (p99(attack.samples) > bound)
    missed.push(`B's p99 ${Math.round(p99(attack.samples))} ms > ${Math.round(bound)} ms`);
  for (const r of attack.rss)
    if (r.endMb > 1.2 * r.startMb) missed.push(`${r.process} ${Math.round(r.startMb)} → ${Math.round(r.endMb)} MB`);
  return missed;
}

describe(
  'one tenant never slows or starves another (noisy neighbour)',
  {
    skip: process.env.KAFKA_BROKERS ? false : 'KAFKA_BROKERS is not set (make test starts a broker)',
    // About two minutes; more while a service freezes (the run then says which assertion it breaks).
    timeout: 360_000,
  },
  () => {
    let cluster: ServiceProcesses;
    let fake: FakeProvider;
    let mcp: McpTestServer;
    const adminToken = generateToken('wkadmin_', 40);
    const databasePrefix = `noisy_${randomBytes(4).toString('hex')}`;
    let a: { key: string };
    let b: { key: string };
    let bCalendar: string;
    let aCalendar: string;
    const bKey = `sk-b-${randomUUID()}`;
    const aKey = `sk-a-${randomUUID()}`;

    async function api(method: string, path: string, key: string, body?: unknown) {
      const res = await fetch(`${cluster.url}/api/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      let parsed: any = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON (the iCalendar feed)
      }
      return { status: res.status, body: parsed, bytes: text.length };
    }

    /**
     * A's large reads, their status only: the body is read as bytes and dropped, so that this process
     * (which also times B) does not spend its event loop decoding and parsing megabytes of A's JSON.
     */
    async function statusOf(path: string, key: string) {
      const res = await fetch(`${cluster.url}/api/v1${path}`, { headers: { authorization: `Bearer ${key}` } });
      await res.arrayBuffer();
      return res.status;
    }

    /** B's keys, taken in turn: B's timed requests (at most 3,000 a minute) stay within the limit of each. */
    const bKeys: string[] = [];
    let bTurn = 0;
    const bKeyNow = () => bKeys[bTurn++ % bKeys.length]!;

    /** B's ordinary requests, each timed: reads and writes over identity, notes-tasks, calendar and agents. */
    const bRoutes: [string, () => Promise<{ status: number; body: any }>][] = [
      ['GET /notes', () => api('GET', '/notes?limit=20', bKeyNow())],
      ['POST /notes', () => api('POST', '/notes', bKeyNow(), { title: 'ordinary', body: 'a note of B' })],
      ['GET /tasks', () => api('GET', '/tasks?limit=20', bKeyNow())],
      ['POST /tasks', () => api('POST', '/tasks', bKeyNow(), { title: 'ordinary task' })],
      ['GET /members', () => api('GET', '/members', bKeyNow())],
      ['GET /agent-configs', () => api('GET', '/agent-configs', bKeyNow())],
      [
        'GET /events',
        () =>
          api('GET', `/events?from=2027-01-01T00:00:00Z&to=2027-02-01T00:00:00Z&calendar_id=${bCalendar}`, bKeyNow()),
      ],
    ];

    /**
     * Rounds of B's routes until both `rounds` and `minMs` are reached, or `maxMs` passed (a B that
     * is starved); `clients` of B at once, each doing rounds.
     */
    async function measureB(rounds: number, minMs: number, maxMs = 25_000, clients = 1): Promise<Sample[]> {
      const samples: Sample[] = [];
      const start = Date.now();
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = 0; (i < rounds || Date.now() - start < minMs) && Date.now() - start < maxMs; i++) {
            for (const [route, call] of bRoutes) {
              const t = performance.now();
              const { status, body } = await call();
              samples.push({
                route,
                ms: performance.now() - t,
                status,
                ...(status >= 400 ? { reason: String(body?.error?.details?.[0]?.reason ?? body?.error?.status) } : {}),
              });
              // B is an ordinary client: at most one request each 40 ms per client (3,000 a minute for
              // two), within its keys' and its tenant's limits however fast the machine answers.
              await sleep(Math.max(0, 40 - (performance.now() - t)));
            }
          }
        }),
      );
      return samples;
    }

    const attacks: Attack[] = [];

    /**
     * The attackers of a window, one worker thread each (noisy-attacker.ts), started once they have
     * loaded: `round()` starts them all and returns what stops them and tells what each got;
     * `close()` ends the workers.
     */
    async function attackers(specs: Record<string, AttackSpec>) {
      const workers = await Promise.all(
        Object.entries(specs).map(async ([what, spec]) => {
          const worker = new Worker(new URL('./noisy-attacker.js', import.meta.url), { workerData: spec });
          await once(worker, 'message'); // ready
          return [what, worker] as const;
        }),
      );
      return {
        round() {
          for (const [, w] of workers) w.postMessage('start');
          return () =>
            Promise.all(
              workers.map(async ([what, w]) => {
                const answer = once(w, 'message');
                w.postMessage('stop');
                return [what, (await answer)[0] as Record<number, number>] as const;
              }),
            );
        },
        close: () => Promise.all(workers.map(([, w]) => w.terminate())),
      };
    }

    /**
     * One window of attacks, in five rounds of an idle moment of B then the attackers while B is
     * timed, so that whatever else loads the machine weighs on B's idle and attacked requests alike;
     * B's bound is taken from the window's own idle moments. Memory: a Node process keeps the heap
     * (and the allocator the pages) it grew to under a new kind of load, used by nothing after a
     * collection; what the attack holds (a leak, an unbounded buffer) grows it again each time. So
     * the first two rounds bring the processes to the attack's working set (the most each held in
     * them: a reading at one instant can fall just after a collection), and the memory after the
     * last three (watched until back within 20 %, or 5 s) is compared with that.
     */
    async function window(name: string, processes: string[], specs: Record<string, AttackSpec>): Promise<Attack> {
      const pids = processes.map((p) => cluster.children.get(p)!.proc.pid!);
      let startMb = pids.map(rssMb);
      const peakMb = [...startMb];
      const watch = setInterval(() => pids.forEach((pid, i) => (peakMb[i] = Math.max(peakMb[i]!, rssMb(pid)))), 200);
      const quiet: Sample[] = [];
      const samples: Sample[] = [];
      const answers: Record<string, Record<number, number>> = {};
      const team = await attackers(specs);
      try {
        for (let round = 0; round < 5; round++) {
          if (round === 2) startMb = [...peakMb];
          quiet.push(...(await measureB(0, 800, 25_000, 2)));
          const stop = team.round();
          await sleep(200);
          samples.push(...(await measureB(0, 1_000, 25_000, 2)));
          for (const [what, tally] of await stop())
            for (const [status, n] of Object.entries(tally))
              (answers[what] ??= {})[Number(status)] = (answers[what]?.[Number(status)] ?? 0) + n;
        }
      } finally {
        // A round that throws (a hook past its timeout on a loaded machine) must not leave attacker
        // threads running: they would keep this file's process, and the suite, alive.
        await team.close();
        clearInterval(watch);
      }
      const stopped = Date.now();
      let endMb = pids.map(rssMb);
      while (endMb.some((mb, i) => mb > 1.2 * startMb[i]!) && Date.now() - stopped < 5_000) {
        await sleep(250);
        endMb = pids.map(rssMb);
      }
      const settledMs = Date.now() - stopped;
      return {
        name,
        quiet,
        samples,
        answers,
        rss: processes.map((process, i) => ({
          process,
          startMb: startMb[i]!,
          peakMb: peakMb[i]!,
          endMb: endMb[i]!,
          settledMs,
        })),
      };
    }

    const idle: Sample[] = [];
    const busy: Sample[] = [];
    /** Ends A's loops of the first window (set once they run): after() calls it if before() failed. */
    let stopAbuse = () => undefined as void;
    /** How long B's run stayed queued (a figure for the log, not a bound). */
    let bRunStartMs = Infinity;
    let bRunDetail = '';
    /** A's runs still running on the hanging tool when B's run left the queue. */
    let aRunningWhenBStarted = 0;
    const aOutcomes = {
      listings: [] as number[],
      feeds: [] as number[],
      big: [] as { status: number; isError?: boolean }[],
      hangCalls: [] as number[],
      secondly: 0,
      runCreates: [] as number[],
    };
    let pendingHangs: Promise<unknown>[] = [];
    const aRuns: string[] = [];

    before(async () => {
      fake = await FakeProvider.start();
      mcp = await startMcpServer({
        transport: 'streamable',
        tools: [{ name: 'hang' }, { name: 'big' }, { name: 'ok' }, { name: A_TOOL }],
        onCall: ((name: string, args: Record<string, unknown>) => {
          if (name === 'hang')
            return new Promise((resolve) => hangs.push(() => resolve({ content: [{ type: 'text', text: 'late' }] })));
          if (name === 'big') return BIG_RESULT;
          return { content: [{ type: 'text', text: `${name}:${JSON.stringify(args)}` }] };
        }) as never,
      });
      const server = process.env.TEST_DATABASE_URL;
      assert.ok(server, 'TEST_DATABASE_URL is set by the test wrapper');
      cluster = await startServiceProcesses({
        databaseServerUrl: server,
        databasePrefix,
        platformAdminToken: adminToken,
        encryptionKeys: Keyring.generateSpec(),
        kafkaBrokers: process.env.KAFKA_BROKERS,
        env: {
          // 1,000 a minute per key (A's first phase makes several hundred requests on one key) and the
          // documented 6,000 per tenant. B spreads its timed requests (at most 3,000 a minute) over 6
          // keys; each attacker of the windows uses one key.
          RATE_LIMIT_PER_MINUTE: '1000',
          RATE_LIMIT_PER_TENANT_PER_MINUTE: '6000',
          // Never-read streams are disconnected after 3 s, not 30: the windows are short.
          STREAM_IDLE_TIMEOUT_MS: '3000',
          OPENAI_BASE_URL: fake.openaiBaseUrl,
          AGENT_PROVIDER_MAX_RETRIES: '0',
          AGENT_RUN_HEARTBEAT_MS: '200',
          AGENT_SCHEDULER_POLL_MS: '200',
          AGENT_RUN_CONCURRENCY: '8',
          AGENT_TENANT_CONCURRENCY: '4',
          // Runs and calls on the hanging tool hold their slots through the whole test.
          APPS_TOOL_CALL_TIMEOUT_MS: '60000',
          APPS_PROBE_INTERVAL: '1h',
        },
      });
      const tenant = async (name: string) => {
        const res = await api('POST', '/admin/tenants', adminToken, {
          name,
          owner: { name: `${name} owner`, email: `owner@${name.toLowerCase()}.test` },
        });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        return { key: res.body.api_key as string };
      };
      a = await tenant('Noisy');
      b = await tenant('Quiet');
      bKeys.push(b.key);
      for (let i = 0; i < 5; i++) {
        const created = await api('POST', '/api-keys', b.key, { name: `B's client ${i}` });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        bKeys.push(created.body.api_key as string);
      }

      // B: a calendar with a few events, and a config whose runs answer at once.
      bCalendar = (await api('POST', '/calendars', b.key, { name: 'B', timezone: 'UTC' })).body.id;
      for (let i = 0; i < 5; i++)
        await api('POST', '/events', b.key, {
          calendar_id: bCalendar,
          title: `B ${i}`,
          start_at: `2027-01-0${i + 1}T09:00:00Z`,
          end_at: `2027-01-0${i + 1}T10:00:00Z`,
        });
      fake.script(bKey, [{ text: 'B is done' }]);
      assert.equal((await api('PUT', '/agent-configs/task-triage', b.key, {})).status, 200);
      assert.equal(
        (await api('PUT', '/agent-configs/task-triage/byok-key', b.key, { api_key: bKey, provider: 'openai' })).status,
        200,
      );

      // A: its MCP server as an app with every tool enabled.
      const app = await api('POST', '/apps', a.key, {
        slug: 'noisy',
        display_name: 'Noisy tools',
        mcp_server_url: mcp.url,
      });
      assert.equal(app.status, 201, JSON.stringify(app.body));
      const probe = await api('POST', '/apps/noisy/probe', a.key, {});
      assert.equal(probe.body?.status, 'healthy', JSON.stringify(probe.body));
      const enabled = await api('PATCH', '/apps/noisy', a.key, { enabled_tools: ['hang', 'big', 'ok', A_TOOL] });
      assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
      // A: the worst guardrails it can store. deny_tools (not allow_tools) so that every tool stays offered
      // and the glob is tried on every tool name of every run.
      const config = await api('PUT', '/agent-configs/task-triage', a.key, {
        guardrails: [
          { type: 'deny_tools', tools: [WORST_GLOB] },
          { type: 'block_pattern', pattern: WORST_PATTERN },
        ],
      });
      assert.equal(config.status, 200, `A stores its guardrails: ${JSON.stringify(config.body)}`);
      // A's runs: "block" ones answer text the pattern is tried on; the others call the hanging tool.
      fake.script(aKey, (body) => {
        if (hasToolResult(body)) return { text: 'never reached while the tool hangs' };
        return JSON.stringify(body.messages).includes('NOISY-BLOCK')
          ? { text: BLOCKED_ANSWER }
          : { tools: [{ name: 'noisy__hang', arguments: {} }] };
      });
      assert.equal(
        (await api('PUT', '/agent-configs/task-triage/byok-key', a.key, { api_key: aKey, provider: 'openai' })).status,
        200,
      );
      // A: a large calendar, 200 events of 12,000 two-byte characters each (4.8 MB of descriptions,
      // past what one message carries), and the worst rule it may store (FREQ=SECONDLY, if accepted).
      aCalendar = (await api('POST', '/calendars', a.key, { name: 'A', timezone: 'Europe/Berlin' })).body.id;
      const description = 'é'.repeat(12_000);
      for (let i = 0; i < 200; i += 20)
        await Promise.all(
          Array.from({ length: 20 }, async (_, j) => {
            const day = String(((i + j) % 28) + 1).padStart(2, '0');
            // Large writes are paced (docs/operations.md): a 429 is tried again after a second, as a client does.
            let res;
            do {
              if (res) await sleep(1_000);
              res = await api('POST', '/events', a.key, {
                calendar_id: aCalendar,
                title: `A ${i + j}`,
                description,
                start_at: `2027-01-${day}T${String((i + j) % 24).padStart(2, '0')}:00:00Z`,
                end_at: `2027-01-${day}T${String((i + j) % 24).padStart(2, '0')}:30:00Z`,
              });
            } while (res.status === 429);
            assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 300));
          }),
        );
      // A series is paced like large writes: a 429 is tried again after its Retry-After.
      do {
        if (aOutcomes.secondly === 429) await sleep(1_000);
        aOutcomes.secondly = (
          await api('POST', '/events', a.key, {
            calendar_id: aCalendar,
            title: 'every second',
            start_at: '2027-01-01T00:00:00Z',
            end_at: '2027-01-01T00:00:01Z',
            rrule: 'FREQ=SECONDLY',
          })
        ).status;
      } while (aOutcomes.secondly === 429);

      await measureB(3, 0); // warm-up

      // A at its worst. Its CPU-heavy loops (large listings and feeds, the big tool result) are
      // paused and resumed below, so B's idle and noisy samples alternate in short windows and
      // whatever else loads the machine (another test file) weighs on both alike.
      let stop = false;
      stopAbuse = () => void (stop = true);
      let paused = true;
      const abuse: Promise<void>[] = [];
      const loop = (body: () => Promise<void>) =>
        abuse.push(
          (async () => {
            while (!stop) {
              if (paused) await sleep(20);
              else await body();
            }
          })(),
        );
      // Runs past every cap: 10 on the hanging tool, 2 whose answer meets the pattern, each one
      // trying the glob on every tool name.
      for (let i = 0; i < 12; i++) {
        const run = await api('POST', '/agents/task-triage/runs', a.key, {
          input: i % 6 === 0 ? 'NOISY-BLOCK' : 'NOISY-HANG',
        });
        aOutcomes.runCreates.push(run.status);
        if (run.status === 201) aRuns.push(run.body.id);
      }
      // Direct calls on the hanging tool: 120 in flight (the gateway admits 128 of a tenant's requests
      // at once; A keeps a few for its other abuse), each holding a call slot to the apps service and
      // a connection of the apps service to the MCP server.
      const hanging = Array.from({ length: 120 }, () =>
        api('POST', '/apps/noisy/tools/hang/call', a.key, { arguments: {} }).then((r) =>
          aOutcomes.hangCalls.push(r.status),
        ),
      );
      await eventually('the hanging calls reached the MCP server', () => hangs.length >= 100, 20_000);
      loop(async () => {
        // A few of them: the 6 MB are made in this process, which also times B.
        if (aOutcomes.big.length >= 3) return void (await sleep(200));
        const r = await api('POST', '/apps/noisy/tools/big/call', a.key, { arguments: {} });
        aOutcomes.big.push({ status: r.status, isError: r.body?.is_error });
      });
      loop(async () => {
        aOutcomes.listings.push(
          await statusOf(
            `/events?from=2027-01-01T00:00:00Z&to=2027-02-01T00:00:00Z&calendar_id=${aCalendar}&limit=200`,
            a.key,
          ),
        );
      });
      loop(async () => {
        aOutcomes.feeds.push(await statusOf(`/calendars/${aCalendar}/events.ics`, a.key));
      });
      const windows = async () => {
        // Many short windows, so that a burst of whatever else runs on the machine weighs on both alike.
        for (let w = 0; w < 8; w++) {
          paused = true;
          await sleep(300); // A's requests in flight end
          idle.push(...(await measureB(5, 0)));
          paused = false;
          await sleep(300);
          busy.push(...(await measureB(5, 1_000)));
        }
      };
      // B's run, while A's wait on the hanging tool.
      paused = false;
      await sleep(1_000);
      const measuring = windows();
      const created = Date.now();
      const bRun = await api('POST', '/agents/task-triage/runs', b.key, { input: 'quick' });
      if (bRun.status !== 201) bRunDetail = `POST answered ${bRun.status}: ${JSON.stringify(bRun.body).slice(0, 300)}`;
      else
        for (;;) {
          const run = await api('GET', `/agents/task-triage/runs/${bRun.body.id}`, b.key);
          if (run.body?.status !== 'queued') {
            bRunStartMs = Date.now() - created;
            bRunDetail = `${run.body?.status} ${run.body?.failure_detail ?? ''}`;
            // What A held at that moment: its runs on the hanging tool keep their slots for
            // APPS_TOOL_CALL_TIMEOUT_MS (60 s), past this wait, until releaseHangs() below.
            const aRunning = await api('GET', '/agents/task-triage/runs?status=running&limit=50', a.key);
            aRunningWhenBStarted = aRunning.body?.data?.length ?? 0;
            break;
          }
          // Gives up on a run that never leaves the queue while A's runs hang (the assertion says so).
          if (Date.now() - created > 30_000) break;
          await sleep(100);
        }
      await measuring;
      stop = true;
      await Promise.all(abuse);
      pendingHangs = hanging;
      releaseHangs(); // the hanging calls end: the attacks below start from a quiet A

      await capacityAttacks();
    });

    /**
     * A window, and a second one if the first misses a bound: on a machine shared with other test
     * runs, a burst of their load can land in one window's attacked rounds and not in its idle ones.
     * An effect of the attack misses the bound both times; the test reports the last window. Each
     * window's attackers are made anew (`attackersOf(attempt)`: tenants of their own), so the second
     * is the same attack: the first one's tenants have spent their minute's budget, and attackers
     * refused at once would load B far less than the first window's did.
     */
    async function underAttack(
      name: string,
      processes: string[],
      attackersOf: (attempt: number) => Promise<Record<string, AttackSpec>>,
    ): Promise<void> {
      let attack = await window(name, processes, await attackersOf(1));
      const missed = verdict(attack);
      if (missed.length) attack = { ...(await window(name, processes, await attackersOf(2))), retried: missed };
      attacks.push(attack);
    }

    /**
     * The attacks of capacity isolation, by tenants of their own (each its own budget), in three
     * windows of attacks on the same kind of capacity run at once: streams, requests, costly writes.
     */
    async function capacityAttacks() {
      const tenant = async (name: string) => {
        const res = await api('POST', '/admin/tenants', adminToken, {
          name,
          owner: { name: `${name} owner`, email: `owner@${name.toLowerCase()}.test` },
        });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        return { key: res.body.api_key as string, id: res.body.tenant.id as string };
      };
      const exporter = await tenant('Exporter');
      // The exporter's audit log: 100,000 entries, written straight to identity's database.
      const identityDb = new pg.Pool({
        connectionString: databaseUrlFor(process.env.TEST_DATABASE_URL!, `${databasePrefix}_identity`),
        max: 1,
      });
      try {
        await identityDb.query(
          `INSERT INTO audit_log (id, tenant_id, action, actor_id, actor_type, resource_type, resource_id, metadata, created_at)
           SELECT gen_random_uuid(), $1, 'note.updated', 'key', 'api_key', 'note', gen_random_uuid()::text,
                  '{"changed_fields":["title","body"]}', now() - g * interval '1 ms'
             FROM generate_series(1, 100000) g`,
          [exporter.id],
        );
        // As an installation's old entries are: vacuumed (hint bits and visibility map set, statistics
        // taken), so the window's first export does not also do autovacuum's work on 100,000 fresh rows.
        await identityDb.query('VACUUM (ANALYZE) audit_log');
      } finally {
        await identityDb.end();
      }
      const feedUrl = (await api('POST', `/calendars/${aCalendar}/feed-token`, a.key)).body.feed_url as string;
      const queuedRun = (
        await api('POST', '/agents/task-triage/runs', a.key, {
          input: 'later',
          run_at: new Date(Date.now() + 3_600_000).toISOString(),
        })
      ).body.id as string;
      const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
      const json = (key: string) => ({ ...bearer(key), 'content-type': 'application/json' });
      const api1 = `${cluster.url}/api/v1`;

      // The same tenants in a second window (the exporter's entries are seeded once), from the next
      // minute on: the first window spent their per-minute limits, its streams' slots are free again.
      await underAttack(STREAMS, ['gateway', 'calendar', 'identity', 'agents'], async (attempt) => {
        if (attempt > 1) await sleep(60_000 - (Date.now() % 60_000) + 100);
        return {
          'never-read feeds': { kind: 'stalled', url: feedUrl, count: 120 },
          'never-read exports': {
            kind: 'stalled',
            url: `${api1}/audit-log/export?format=ndjson`,
            headers: { Authorization: `Bearer ${exporter.key}` },
            count: 50,
          },
          'slow exports': {
            kind: 'loop',
            url: `${api1}/audit-log/export?format=csv`,
            headers: bearer(exporter.key),
            loops: 4,
            slowly: true,
          },
          'event streams': {
            kind: 'open',
            url: `${api1}/agents/task-triage/runs/${queuedRun}/events`,
            headers: bearer(a.key),
            count: 300,
          },
        };
      });

      const toolCall = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'list_tasks', arguments: {} } };
      await underAttack(REQUESTS, ['gateway', 'agents', 'notes-tasks'], async (attempt) => {
        const [mcpCaller, flooder] = await Promise.all([tenant(`Caller${attempt}`), tenant(`Flooder${attempt}`)]);
        const mcpHeaders = {
          ...json(mcpCaller.key),
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
        };
        return {
          'MCP tool calls': {
            kind: 'loop',
            url: `${api1}/mcp`,
            method: 'POST',
            headers: mcpHeaders,
            body: JSON.stringify({ ...toolCall, id: 1 }),
            loops: 16,
          },
          'MCP batches of 100 calls': {
            kind: 'loop',
            url: `${api1}/mcp`,
            method: 'POST',
            headers: mcpHeaders,
            body: JSON.stringify(Array.from({ length: 100 }, (_, id) => ({ ...toolCall, id }))),
            loops: 1,
          },
          'a flood on one key': {
            kind: 'loop',
            url: `${api1}/notes?limit=20`,
            headers: bearer(flooder.key),
            loops: 64,
          },
        };
      });

      await underAttack(COSTS, ['gateway', 'notes-tasks', 'calendar'], async (attempt) => {
        const [writer, scheduler] = await Promise.all([tenant(`Writer${attempt}`), tenant(`Scheduler${attempt}`)]);
        const seriesCalendar = (await api('POST', '/calendars', scheduler.key, { name: 'S', timezone: 'UTC' })).body.id;
        return {
          'notes of 100 KB and 16 KiB of metadata': {
            kind: 'loop',
            url: `${api1}/notes`,
            method: 'POST',
            headers: json(writer.key),
            body: JSON.stringify({ title: 'large', body: 'x'.repeat(100_000), metadata: { blob: 'y'.repeat(16_000) } }),
            loops: 16,
          },
          'daily series to 2999': {
            kind: 'loop',
            url: `${api1}/events`,
            method: 'POST',
            headers: json(scheduler.key),
            body: JSON.stringify({
              calendar_id: seriesCalendar,
              title: 'forever',
              start_at: '2027-01-04T09:00:00Z',
              end_at: '2027-01-04T09:15:00Z',
              rrule: 'FREQ=DAILY;UNTIL=29991231T000000Z',
            }),
            loops: 8,
          },
        };
      });
    }

    after(async () => {
      stopAbuse();
      releaseHangs();
      for (const id of aRuns)
        await api('POST', `/agents/task-triage/runs/${id}/cancel`, a.key, {}).catch(() => undefined);
      await mcp?.close();
      await cluster?.stop();
      await fake?.stop();
    });

    it("keeps B's p99 within twice its p99 while A is idle (floor 200 ms)", (t) => {
      assert.ok(idle.length >= 200, `${idle.length} samples with A idle`);
      const before = p99(idle);
      const during = p99(busy);
      const slowest = [...busy]
        .sort((x, y) => y.ms - x.ms)
        .slice(0, 5)
        .map((s) => `${s.route} ${Math.round(s.ms)} ms`);
      t.diagnostic(
        `B's p99: ${Math.round(before)} ms with A idle, ${Math.round(during)} ms with A noisy; slowest: ${slowest.join(', ')}`,
      );
      assert.ok(
        during <= 2 * Math.max(before, IDLE_P99_FLOOR_MS),
        `B's p99 was ${Math.round(before)} ms with A idle and ${Math.round(during)} ms with A noisy (${busy.length} requests); slowest: ${slowest.join(', ')}`,
      );
      const failed = busy.filter((s) => s.status >= 400).map((s) => `${s.route} ${s.status}`);
      assert.deepEqual([...new Set(failed)], [], `B's requests all succeed while A is noisy (${failed.length} failed)`);
    });

    it("starts B's run while A's runs wait on a hanging tool, not after them", (t) => {
      assert.ok(aRuns.length >= 1, `A's runs were accepted (${aOutcomes.runCreates.join(',')})`);
      assert.ok(
        mcp.calls.some((c) => c.name === 'hang') || fake.chats(aKey).length > 0,
        "A's runs ran (the model was asked, the hanging tool called)",
      );
      // An order, not a time: B's run left the queue while A's runs still held their slots on the
      // hanging tool (were A's runs to starve B, B's would wait until the tool answered).
      t.diagnostic(`B's run left queued after ${bRunStartMs} ms (${bRunDetail})`);
      assert.ok(bRunStartMs < Infinity, `B's run never left queued while A's runs hung (${bRunDetail})`);
      assert.ok(aRunningWhenBStarted >= 1, "A's runs were still on the hanging tool when B's run started");
    });

    it("answers A's large listings and feed with 200 (a page stops early, the feed streams)", () => {
      assert.ok(aOutcomes.listings.length > 0 && aOutcomes.feeds.length > 0, 'A listed and fetched its feed');
      assert.deepEqual([...new Set(aOutcomes.listings)], [200], `listings: ${aOutcomes.listings.join(',')}`);
      assert.deepEqual([...new Set(aOutcomes.feeds)], [200], `feeds: ${aOutcomes.feeds.join(',')}`);
      assert.ok([201, 400].includes(aOutcomes.secondly), `FREQ=SECONDLY: ${aOutcomes.secondly}`);
    });

    it("answers A's oversized tool result with 200 and is_error (the result cut at APPS_TOOL_RESULT_MAX_BYTES)", () => {
      assert.ok(aOutcomes.big.length > 0, 'A called the big tool');
      assert.ok(
        mcp.calls.some((c) => c.name === 'big'),
        'the MCP server was asked for the 6 MB result',
      );
      assert.deepEqual([...new Set(aOutcomes.big.map((r) => `${r.status} ${r.isError}`))], ['200 true']);
    });

    it('needs no restart: A is served again as before, and its hanging calls end when the tool answers', async () => {
      releaseHangs();
      const ended = await Promise.race([Promise.all(pendingHangs).then(() => true), sleep(20_000).then(() => false)]);
      assert.ok(ended, 'every call on the hanging tool got its answer once the tool answered');
      assert.ok(aOutcomes.hangCalls.includes(200), `answers: ${aOutcomes.hangCalls.join(',')}`);
      // On its own: within seconds (a service the gateway marked down is checked again every 5 s).
      // Polled every 500 ms: each poll is a request on A's key, and polls every 20 ms spent its
      // 1,000 a minute themselves (429 until the minute's end); 75 s bounds a hang, and allows that minute.
      const served = async (what: string, call: () => Promise<{ status: number; body: any }>, status: number) => {
        let last: { status: number; body: any } | undefined;
        await eventually(
          `${what} answers ${status}`,
          async () => (last = await call()).status === status,
          75_000,
          500,
        ).catch(() =>
          assert.fail(`${what} answered ${last?.status}: ${JSON.stringify(last?.body ?? null).slice(0, 200)}`),
        );
        return last!;
      };
      await served('POST /notes', () => api('POST', '/notes', a.key, { title: 'after the storm' }), 201);
      await served('GET /notes', () => api('GET', '/notes', a.key), 200);
      await served('GET /calendars/{id}', () => api('GET', `/calendars/${aCalendar}`, a.key), 200);
      await served('GET /agent-configs', () => api('GET', '/agent-configs', a.key), 200);
      const ok = await served(
        'a tool call',
        () => api('POST', '/apps/noisy/tools/ok/call', a.key, { arguments: { n: 1 } }),
        200,
      );
      assert.equal(ok.body.is_error, false);
    });

    for (const name of [STREAMS, REQUESTS, COSTS])
      it(`keeps B's p99 and B error-free, and gives the memory back, under ${name}`, (t) => {
        const attack = attacks.find((x) => x.name === name);
        assert.ok(attack, 'the attack ran');
        const bound = 2 * Math.max(p99(attack.quiet), IDLE_P99_FLOOR_MS);
        const during = p99(attack.samples);
        const slowest = [...attack.samples]
          .sort((x, y) => y.ms - x.ms)
          .slice(0, 3)
          .map((s) => `${s.route} ${Math.round(s.ms)} ms`);
        const memory = attack.rss
          .map(
            (r) => `${r.process} ${Math.round(r.startMb)} → peak ${Math.round(r.peakMb)} → ${Math.round(r.endMb)} MB`,
          )
          .join(', ');
        if (attack.retried) t.diagnostic(`a first window missed: ${attack.retried.join('; ')}`);
        t.diagnostic(
          `${name}: B's p99 ${Math.round(during)} ms (bound ${Math.round(bound)}, idle p99 ${Math.round(p99(attack.quiet))}) over ${attack.samples.length} requests; slowest ${slowest.join(', ')}; A's answers ${JSON.stringify(attack.answers)}; ${memory} (${attack.rss[0]!.settledMs} ms after)`,
        );
        const failed = attack.samples.filter((s) => s.status >= 400).map((s) => `${s.route} ${s.status} ${s.reason}`);
        assert.deepEqual([...new Set(failed)], [], `B's requests all succeed (${failed.length} failed)`);
        assert.ok(
          during <= bound,
          `B's p99 ${Math.round(during)} ms is within ${Math.round(bound)} ms; slowest ${slowest.join(', ')}`,
        );
        for (const r of attack.rss)
          assert.ok(r.endMb <= 1.2 * r.startMb, `${r.process}'s memory came back within 20 %: ${memory}`);
      });
  },
);
