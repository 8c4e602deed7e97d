/**
 * Benchmark of agent runs (not a test): RUNS queued runs, each a script of one tool call (list_tasks
 * on a real notes-tasks) and a final answer from the fake provider on loopback, worked by two agents
 * replicas on one database, twice: the first burst on fresh processes (printed apart), then the
 * measured one. Prints runs per second (run_at → last run finished) and the time from run_at to
 * `running` (p50/p99). The fake provider runs in a process of its own, as a provider's
 * servers are elsewhere: its CPU is a third party's, printed apart, and off the replicas' event loop.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-agents.mjs
 *   (or `make bench`; WORKAUTO_KAFKA=off skips the broker, which this benchmark does not need)
 *
 * Env: RUNS (1000), CONCURRENCY (runs per replica at once, 16), TENANTS (1). Needs TEST_DATABASE_URL (with-infra sets it).
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { AgentsServiceService as S } from '@workauto/protos/workauto/agents/v1/agents.js';
import { startRunStack, tenant, newKey } from '../services/agents/dist/test-support.js';
import { FakeProviderProcess, fakeProviderSettings } from '../services/agents/dist/testing/fake-provider.js';
import {
  cpuSnapshot,
  printCpuPerRequest,
  printTopStatements,
  report,
  statementsSince,
  summarize,
} from './lib-bench.mjs';

const RUNS = Number(process.env.RUNS ?? 1_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);
/** Runs are spread over this many tenants (a run's end is serialised per tenant and blueprint: its failure streak). */
const TENANTS = Number(process.env.TENANTS ?? 1);

const fake = await FakeProviderProcess.start();
const stack = await startRunStack({
  replicas: 2,
  // The per-tenant cap (AGENT_TENANT_CONCURRENCY, default 4) would otherwise bound a one-tenant benchmark to 4 runs at once.
  config: {
    runs: {
      concurrency: CONCURRENCY,
      tenantConcurrency: 2 * CONCURRENCY,
      pollMs: 50,
      heartbeatMs: 2_000,
      leaseMs: 30_000,
    },
    providers: fakeProviderSettings(fake),
  },
});
try {
  const tenants = Array.from({ length: TENANTS }, () => tenant());
  const script = {
    untilToolResult: { tools: [{ name: 'list_tasks', arguments: {} }], usage: { input: 1_000, output: 50 } },
    afterToolResult: { text: 'Reviewed the tasks.', usage: { input: 2_000, output: 100 } },
  };
  const keys = [];
  for (const t of tenants) {
    const key = newKey('openai');
    keys.push(key);
    await fake.script(key, script);
    await stack.client.call(S.putByokKey, { blueprint: 'task-triage', api_key: key, provider: 0 }, t.call);
  }
  /**
   * A backlog of RUNS: every run queued (through the API, due in an hour) before any is due, then
   * all made due at once (SQL, in one transaction), and waited for. Returns the runs' ids.
   */
  const burst = async (onDue = async () => {}) => {
    const later = new Date(Date.now() + 3_600_000);
    const created = performance.now();
    const ids = [];
    for (let i = 0; i < RUNS; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, RUNS - i) }, (_, j) =>
          stack.client.call(
            S.createAgentRun,
            { blueprint: 'task-triage', input: randomUUID(), run_at: later },
            tenants[(i + j) % TENANTS].call,
          ),
        ),
      );
      ids.push(...batch.map((r) => r.id));
    }
    console.log(
      `queued ${RUNS} runs through the API in ${((performance.now() - created) / 1000).toFixed(1)} s (${(RUNS / ((performance.now() - created) / 1000)).toFixed(0)}/s)`,
    );
    await onDue();
    const due = await stack.db.connect();
    try {
      await due.query('BEGIN');
      await due.query(`UPDATE agent_runs SET run_at = now() WHERE id = ANY($1)`, [ids]);
      await due.query(`UPDATE jobs SET next_attempt_at = now() WHERE queue = 'agent-runs' AND state = 'queued'`);
      await due.query('COMMIT');
    } finally {
      due.release();
    }
    for (;;) {
      const { rows } = await stack.db.query(
        `SELECT count(*) FILTER (WHERE status IN ('succeeded', 'failed'))::int AS done, count(*) FILTER (WHERE status = 'failed')::int AS failed
           FROM agent_runs WHERE id = ANY($1)`,
        [ids],
      );
      if (rows[0].done === RUNS) {
        if (rows[0].failed) console.log(`${rows[0].failed} runs failed`);
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    return ids;
  };
  /** Runs per second of a burst: RUNS over the time from their run_at to the last one's end. */
  const rate = async (ids) => {
    const { rows } = await stack.db.query(
      `SELECT extract(epoch FROM max(finished_at) - min(run_at))::float8 AS s FROM agent_runs WHERE id = ANY($1)`,
      [ids],
    );
    return { perS: RUNS / rows[0].s, seconds: rows[0].s };
  };

  // Fresh processes spend their first thousand runs partly compiling (V8's optimizing compiler) and
  // running code not yet optimized: that burst is printed apart, and the figure is the next one's,
  // what a running deployment does (as bench-mix measures after its warm-up).
  const cold = await rate(await burst());
  console.log(`first burst, fresh processes: ${cold.perS.toFixed(1)} runs/s (${cold.seconds.toFixed(1)} s)`);
  report(
    'agent_runs_per_s_fresh',
    `agent runs, the first ${RUNS} queued at once on fresh processes`,
    cold.perS,
    'runs/s',
  );

  const databaseUrl = stack.db.options.connectionString;
  const runRowWrites = async () =>
    Number(
      (await stack.db.query(`SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'agent_runs'`)).rows[0]
        .n_tup_upd,
    );
  let writesBefore = 0;
  let cpuBefore;
  const ids = await burst(async () => {
    await statementsSince(databaseUrl); // from here: the runs' own statements
    writesBefore = await runRowWrites();
    cpuBefore = cpuSnapshot();
  });
  // The CPU a run costs, whatever the machine's load: this process is both replicas and notes-tasks.
  printCpuPerRequest('runs', cpuBefore, cpuSnapshot(), RUNS, { apart: ['fake-provider'] });
  await printTopStatements(databaseUrl, 25);
  const statements = await statementsSince(databaseUrl);
  if (statements)
    console.log(
      `SQL statements per run: ${[...statements].map(([db, { calls }]) => `${db} ${(calls / RUNS).toFixed(1)}`).join(', ')}`,
    );
  // Each write of a run's row is a new row version (and its index entries): the database's work per
  // run beyond its statements' count. Backends report their counts within a second of going idle.
  await new Promise((r) => setTimeout(r, 1_500));
  console.log(
    `writes of a run's row per run: ${((await runRowWrites()) - writesBefore - RUNS) / RUNS} (the due update apart)`,
  );
  const { rows } = await stack.db.query(
    `SELECT extract(epoch FROM started_at - run_at) * 1000 AS to_running_ms, extract(epoch FROM finished_at - started_at) * 1000 AS running_ms
       FROM agent_runs WHERE id = ANY($1)`,
    [ids],
  );
  const { perS, seconds: lastDoneS } = await rate(ids);
  console.log(
    `${RUNS} runs (1 tool call each) of ${TENANTS} tenant(s), 2 replicas × ${CONCURRENCY}, after a first burst: ${perS.toFixed(1)} runs/s (${lastDoneS.toFixed(1)} s from run_at to the last run's end)`,
  );
  report('agent_runs_per_s', `agent runs, ${RUNS} queued at once, fake provider`, perS, 'runs/s', {
    value: 200,
    better: 'higher',
  });
  console.log(`run_at → running: ${summarize(rows.map((r) => Number(r.to_running_ms)))}`);
  console.log(`running → done:   ${summarize(rows.map((r) => Number(r.running_ms)))}`);
  // How much of the slots' time ran a run (started → finished): the rest is a slot waiting for its
  // next claim, or a run's start and end around it (its job claimed, recorded, finished).
  const running = rows.reduce((a, r) => a + Number(r.running_ms), 0) / 1000;
  console.log(
    `slots running a run: ${((100 * running) / (2 * CONCURRENCY * lastDoneS)).toFixed(0)} % of 2 × ${CONCURRENCY} slots × ${lastDoneS.toFixed(1)} s (a run ${((1000 * running) / RUNS).toFixed(0)} ms on average); load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  let calls = 0;
  for (const k of keys) calls += (await fake.chats(k)).length;
  console.log(`provider calls: ${calls} (both bursts)`);
} finally {
  await stack.stop();
  await fake.stop();
}
