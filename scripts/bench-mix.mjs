/**
 * Load test of the whole API mix (not a test), with closed-loop clients (each sends its next request
 * when the last one answered): reads and writes across notes, tasks, contacts and
 * deals through the gateway, each service in its own process (the deployment shape), real
 * PostgreSQL and Kafka. Throughput and p99 at concurrency 32 and 128, the answers at 1,024 (the
 * excess shed with Retry-After, nothing else), then a ramp (doubling the concurrency) to the point
 * where failures start (errors, timeouts, a 5xx not shed with Retry-After), noting where shedding
 * (a 503 or a tenant's 429 with Retry-After, by design) starts; no 5xx is allowed below that point.
 *
 *   make build && node deploy/embedded/dist/with-infra.js -- node scripts/bench-mix.mjs
 *
 * The mix (weights in MIX below, docs/benchmarks.md): 70 % reads — GET a note (20), list notes (10),
 * GET a task (10), list tasks (10), GET a deal (8), list contacts (7), a pipeline summary (5) — and
 * 30 % writes — create a note (8), move a deal to another stage (8), update a task (6), create a
 * task (4), create a contact (4). Ids are picked at random from rows seeded through the API.
 * Env: WARMUP (30 s at c=32 before the measured levels: fresh processes spend their first seconds
 * compiling and growing their heaps, which a running deployment does not; that CPU is printed
 * apart), DURATION (15 s per level), RAMP_DURATION (10), RAMP_MAX (2048), TIMEOUT (10 s per request),
 * RAMP=0 (c=32 and c=128 only: the CPU per request, for an A/B of two builds run one after the other),
 * WORKAUTO_PG_STAT_STATEMENTS=1 (with-infra's PostgreSQL with pg_stat_statements: SQL statements per
 * request at c=32 by database, which no load on the machine moves),
 * LEVELS (e.g. `2048` or `1024,2048`: only these concurrencies, RAMP_DURATION s each, after the
 * warm-up; no c=32/c=128 figures). Each level prints the first few bodies of each 5xx status, and
 * the run ends with the services' error and warning log lines (a 500 there names its cause).
 * Needs TEST_DATABASE_URL (with-infra sets it).
 */
import { loadavg } from 'node:os';
import { Agent, request } from 'undici';
import {
  cpuDelta,
  cpuSnapshot,
  percentile,
  printPlannedStatements,
  printTopStatements,
  report,
  startBenchStack,
  statementsSince,
} from './lib-bench.mjs';

const DURATION = Number(process.env.DURATION ?? 15);
const WARMUP = Number(process.env.WARMUP ?? 30);
const RAMP_DURATION = Number(process.env.RAMP_DURATION ?? 10);
const RAMP_MAX = Number(process.env.RAMP_MAX ?? 2048);
const TIMEOUT = Number(process.env.TIMEOUT ?? 10);
const LEVELS = process.env.LEVELS ? process.env.LEVELS.split(',').map(Number) : undefined;
/**
 * The load generator's HTTP client: undici's own request API, not fetch (which is undici under web
 * streams, Request and Response objects and an AbortSignal per request): 120–140 against 370–400 µs
 * of CPU per mix request, CPU that shares the machine's two cores with the product and the event
 * loop that times the answers (docs/benchmarks.md, "The API mix").
 */
const clients = new Agent();
/** What undici throws when an answer took longer than TIMEOUT: counted as timeouts. */
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Bodies kept per 5xx status and level (what a 5xx said is how its cause is found). */
const SAMPLES_PER_STATUS = 3;

const { stack, api, createTenant, databaseUrl } = await startBenchStack({ shape: 'processes' });
/** When the services were ready: each level prints its end as seconds since then (connections age; server.ts ends them at 120 s). */
const stackReady = performance.now();
try {
  const tenant = await createTenant();
  const key = tenant.api_key;
  const pipeline = await api('POST', '/api/v1/pipelines', key, {
    name: 'Mix',
    stages: ['Lead', 'Qualified', 'Proposal', 'Negotiation'].map((name, i) => ({
      name,
      stage_type: 'open',
      default_confidence: (i + 1) / 5,
    })),
  });
  const stageIds = pipeline.stages.map((s) => s.id);
  const seed = async (n, create) => {
    const ids = [];
    for (let i = 0; i < n; i += 10)
      ids.push(
        ...(await Promise.all(Array.from({ length: Math.min(10, n - i) }, (_, j) => create(i + j)))).map((r) => r.id),
      );
    return ids;
  };
  const notes = await seed(200, (i) =>
    api('POST', '/api/v1/notes', key, {
      title: `note ${i}`,
      body: `# Note ${i}\n\n${'Some text about the account. '.repeat(20)}`,
    }),
  );
  const tasks = await seed(200, (i) =>
    api('POST', '/api/v1/tasks', key, { title: `task ${i}`, description: 'follow up' }),
  );
  const contacts = await seed(100, (i) =>
    api('POST', '/api/v1/contacts', key, { name: `Contact ${i}`, company: 'Acme' }),
  );
  const deals = await seed(200, (i) =>
    api('POST', '/api/v1/deals', key, {
      title: `deal ${i}`,
      pipeline_id: pipeline.id,
      stage_id: stageIds[i % 4],
      amount: 1000 + i,
    }),
  );
  console.log(
    `seeded ${notes.length} notes, ${tasks.length} tasks, ${contacts.length} contacts, ${deals.length} deals`,
  );

  const pick = (a) => a[Math.floor(Math.random() * a.length)];
  let n = 0;
  const MIX = [
    [20, 'GET note', () => ({ method: 'GET', path: `/api/v1/notes/${pick(notes)}` })],
    [10, 'list notes', () => ({ method: 'GET', path: '/api/v1/notes?limit=20' })],
    [10, 'GET task', () => ({ method: 'GET', path: `/api/v1/tasks/${pick(tasks)}` })],
    [10, 'list tasks', () => ({ method: 'GET', path: '/api/v1/tasks?limit=20' })],
    [8, 'GET deal', () => ({ method: 'GET', path: `/api/v1/deals/${pick(deals)}` })],
    [7, 'list contacts', () => ({ method: 'GET', path: '/api/v1/contacts?limit=20' })],
    [5, 'pipeline summary', () => ({ method: 'GET', path: `/api/v1/pipelines/${pipeline.id}/summary` })],
    [
      8,
      'create note',
      () => ({ method: 'POST', path: '/api/v1/notes', body: { title: `mix ${n++}`, body: 'written under load' } }),
    ],
    [
      8,
      'move deal',
      () => ({ method: 'PATCH', path: `/api/v1/deals/${pick(deals)}`, body: { stage_id: pick(stageIds) } }),
    ],
    [
      6,
      'update task',
      () => ({ method: 'PATCH', path: `/api/v1/tasks/${pick(tasks)}`, body: { title: `task renamed ${n++}` } }),
    ],
    [4, 'create task', () => ({ method: 'POST', path: '/api/v1/tasks', body: { title: `mix task ${n++}` } })],
    [4, 'create contact', () => ({ method: 'POST', path: '/api/v1/contacts', body: { name: `Mix contact ${n++}` } })],
  ];
  const totalWeight = MIX.reduce((a, [w]) => a + w, 0);
  const nextRequest = () => {
    let r = Math.random() * totalWeight;
    for (const [w, kind, make] of MIX) if ((r -= w) < 0) return { kind, ...make() };
    return { kind: MIX[0][1], ...MIX[0][2]() };
  };

  const headers = { authorization: `Bearer ${key}` };
  /**
   * One level: `connections` clients, each sending the mix's requests one after the other for
   * `seconds` (undici's keep-alive pool: one connection per client in flight).
   */
  async function level(connections, seconds) {
    const latencies = [];
    /** Each kind of request's latencies: which of them make the tail. */
    const byKind = {};
    const codes = {};
    let errors = 0;
    let timeouts = 0;
    let shed = 0;
    let unshed5xx = 0;
    const samples = {};
    /** Requests that got no HTTP answer, by cause (not timeouts). */
    const failures = {};
    const started = performance.now();
    const until = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < until) {
          const next = nextRequest();
          const t0 = performance.now();
          try {
            const res = await request(`${stack.url}${next.path}`, {
              method: next.method,
              headers: next.body ? { ...headers, 'content-type': 'application/json' } : headers,
              body: next.body ? JSON.stringify(next.body) : undefined,
              dispatcher: clients,
              headersTimeout: TIMEOUT * 1000,
              bodyTimeout: TIMEOUT * 1000,
            });
            const body = await res.body.text();
            const status = res.statusCode;
            codes[status] = (codes[status] ?? 0) + 1;
            // Load shed as the API promises: a 503 (or a tenant's 429) that says when to retry.
            if ((status === 503 || status === 429) && res.headers['retry-after']) shed++;
            else if (status >= 500) unshed5xx++;
            if (status >= 500 && (samples[status] ??= []).length < SAMPLES_PER_STATUS)
              samples[status].push(`${next.method} ${next.path} → ${body.slice(0, 600)}`);
            latencies.push(performance.now() - t0);
            (byKind[next.kind] ??= []).push(performance.now() - t0);
          } catch (err) {
            if (TIMEOUT_CODES.has(err.code)) timeouts++;
            else {
              errors++;
              const cause = `${err.message}: ${err.code ?? err.cause?.code ?? err.cause?.message ?? ''}`;
              failures[cause] = (failures[cause] ?? 0) + 1;
            }
          }
        }
      }),
    );
    const wall = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    const count = (test) =>
      Object.entries(codes)
        .filter(([c]) => test(Number(c)))
        .reduce((a, [, n]) => a + n, 0);
    const non2xx = count((c) => c < 200 || c > 299);
    const fiveXx = count((c) => c >= 500);
    const row = {
      connections,
      rps: latencies.length / wall,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      total: latencies.length,
      non2xx,
      errors,
      timeouts,
      fiveXx,
      shed,
      unshed5xx,
      /** Failures: what a client cannot act on (a shed answer says when to retry, so it is not one). */
      bad: unshed5xx + errors + timeouts,
    };
    console.log(
      `  c=${String(connections).padStart(4)}  ${row.rps.toFixed(0).padStart(6)} req/s   p50 ${row.p50.toFixed(0).padStart(5)} ms   p99 ${row.p99.toFixed(0).padStart(5)} ms   ` +
        `${row.total} responses, ${non2xx} non-2xx (${fiveXx} 5xx; ${shed} shed with Retry-After), ${errors} errors, ${timeouts} timeouts   codes ${JSON.stringify(codes)}   (t+${((performance.now() - stackReady) / 1000).toFixed(0)} s)`,
    );
    const kinds = Object.entries(byKind).map(([kind, ms]) => {
      ms.sort((a, b) => a - b);
      return { kind, p50: percentile(ms, 50), p99: percentile(ms, 99) };
    });
    kinds.sort((a, b) => b.p99 - a.p99);
    console.log(
      `    by kind, p50 / p99 ms: ${kinds.map((k) => `${k.kind} ${k.p50.toFixed(0)} / ${k.p99.toFixed(0)}`).join(', ')}`,
    );
    if (errors) console.log(`    no answer: ${JSON.stringify(failures)}`);
    for (const [status, bodies] of Object.entries(samples)) for (const b of bodies) console.log(`    ${status}: ${b}`);
    return row;
  }

  /**
   * CPU µs per request of every process of the product (services, PostgreSQL, the Kafka broker),
   * printed by process; the load generator (this script's HTTP clients) apart.
   */
  const GENERATOR = ['this script', 'its finished children (load generator)'];
  /** µs of CPU per request over the product's processes (the load generator apart). */
  const productCpu = (spent, requests) =>
    [...spent].filter(([k]) => !GENERATOR.includes(k)).reduce((a, [, ms]) => a + (ms * 1000) / requests, 0);
  function mixCpuPerRequest(spent, requests) {
    const rows = [...spent].filter(([, ms]) => ms > 0).sort((a, b) => b[1] - a[1]);
    const us = (ms) => (ms * 1000) / requests;
    const product = productCpu(spent, requests);
    console.log(
      `  CPU per request at c=32 (${requests} requests, load average ${loadavg()[0].toFixed(2)}): ${product.toFixed(0)} µs over the product's processes`,
    );
    for (const [k, ms] of rows)
      console.log(
        `    ${(GENERATOR.includes(k) ? `${k} (load generator, apart)` : k).padEnd(50)} ${us(ms).toFixed(0).padStart(6)} µs`,
      );
    return product;
  }

  /** The services' log lines (warn and above), counted by kind (the gateway logs each 5xx with its cause). */
  function printServiceErrors() {
    // The processes log at warn (processes.ts), so every line they printed counts.
    const lines = stack
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    const byCause = new Map();
    for (const l of lines) {
      // One key per kind of line: drop ids and times so repeats collapse.
      const key = l
        .replace(/"(time|request_id|pid|hostname|trace_id|span_id|ms)":("[^"]*"|\d+),?/g, '')
        .replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>')
        .slice(0, 700);
      byCause.set(key, (byCause.get(key) ?? 0) + 1);
    }
    console.log(`service log lines at warn or above: ${lines.length}`);
    for (const [k, n] of [...byCause].sort((a, b) => b[1] - a[1]).slice(0, 25))
      console.log(`  ${String(n).padStart(6)} × ${k}`);
  }

  if (LEVELS) {
    await level(32, 3);
    for (const c of LEVELS) await level(c, RAMP_DURATION);
    printServiceErrors();
  } else {
    console.log(
      `API mix (70 % reads, 30 % writes; weights in scripts/bench-mix.mjs), ${DURATION} s per level after a ${WARMUP} s warm-up:`,
    );
    const coldBefore = cpuSnapshot();
    const warmUp = await level(32, WARMUP);
    // Fresh processes spend their first seconds compiling (V8's optimizing compiler) and growing
    // their heaps: printed apart, so the figure below is what a running deployment spends.
    const coldCpu = productCpu(cpuDelta(coldBefore, cpuSnapshot()), warmUp.total);
    console.log(
      `  CPU per request during the warm-up (fresh processes, ${warmUp.total} requests): ${coldCpu.toFixed(0)} µs`,
    );
    report(
      'mix_cpu_per_request_warmup',
      `API mix CPU per request in the first ${WARMUP} s of fresh processes, c=32`,
      coldCpu,
      'µs',
    );
    await statementsSince(databaseUrl('notes_tasks'));
    const cpuBefore = cpuSnapshot();
    const at32 = await level(32, DURATION);
    const mixCpu = mixCpuPerRequest(cpuDelta(cpuBefore, cpuSnapshot()), at32.total);
    for (const db of ['identity', 'notes_tasks', 'crm_pipelines']) await printTopStatements(databaseUrl(db), 8);
    await printPlannedStatements(databaseUrl('notes_tasks'), 14);
    const statements = await statementsSince(databaseUrl('notes_tasks'));
    if (statements) {
      console.log(`  SQL statements per request at c=32, by database (pg_stat_statements):`);
      for (const [db, { calls, ms }] of [...statements].sort((a, b) => b[1].calls - a[1].calls))
        console.log(
          `    ${db.padEnd(40)} ${(calls / at32.total).toFixed(2).padStart(6)} statements  ${((ms * 1000) / at32.total).toFixed(0).padStart(5)} µs`,
        );
    }
    const at128 = await level(128, DURATION);
    for (const r of [at32, at128])
      if (r.fiveXx > 0)
        console.log(`  5xx at concurrency ${r.connections}: a defect (below the breaking point there must be none)`);
    report('mix_rps_32', 'API mix throughput, c=32', at32.rps, 'req/s');
    report('mix_p99_32', 'API mix p99, c=32', at32.p99, 'ms', { value: 80, better: 'lower' });
    report('mix_rps_128', 'API mix throughput, c=128', at128.rps, 'req/s');
    report('mix_p99_128', 'API mix p99, c=128', at128.p99, 'ms');
    report('mix_5xx_below_break', 'API mix 5xx at c=32 and c=128', at32.fiveXx + at128.fiveXx, 'responses', {
      value: 0,
      better: 'lower',
    });

    if (process.env.RAMP !== '0') {
      // Far past what 2 cores serve: the excess must be shed (503 or a tenant's 429, with Retry-After),
      // never a 5xx without one, a timeout or a dropped connection.
      const at1024 = await level(1024, RAMP_DURATION);
      report(
        'mix_unshed_1024',
        'API mix at c=1,024: 5xx not shed as 503 with Retry-After, errors and timeouts',
        at1024.unshed5xx + at1024.errors + at1024.timeouts,
        'responses',
        { value: 0, better: 'lower' },
      );
      console.log(`ramp, ${RAMP_DURATION} s per level, until errors, timeouts or 5xx without Retry-After:`);
      let breaking = [at32, at128].find((r) => r.bad > 0);
      let shedding = [at32, at128].find((r) => r.shed > 0);
      for (let c = 256; !breaking && c <= RAMP_MAX; c *= 2) {
        const r = c === 1024 ? at1024 : await level(c, RAMP_DURATION);
        shedding ??= r.shed > 0 ? r : undefined;
        if (r.bad > 0) breaking = r;
      }
      if (shedding)
        report(
          'mix_shedding_concurrency',
          'API mix: concurrency where answers start to be shed (503 or 429 with Retry-After)',
          shedding.connections,
          'connections',
        );
      if (breaking) {
        console.log(
          `failures start at concurrency ${breaking.connections} (${breaking.unshed5xx} 5xx without Retry-After, ${breaking.errors} errors, ${breaking.timeouts} timeouts)`,
        );
        report(
          'mix_breaking_concurrency',
          'API mix: concurrency where errors, timeouts or 5xx without Retry-After start',
          breaking.connections,
          'connections',
        );
      } else {
        console.log(`no errors, timeouts or 5xx without Retry-After up to concurrency ${RAMP_MAX}`);
        report(
          'mix_breaking_concurrency',
          `API mix: no errors, timeouts or 5xx without Retry-After up to this concurrency`,
          RAMP_MAX,
          'connections',
        );
      }
    }
    printServiceErrors();
    report('mix_cpu_per_request', 'API mix CPU per request, every process of the product, c=32', mixCpu, 'µs', {
      value: 1800,
      better: 'lower',
    });
    console.log(`mix CPU per request ${mixCpu.toFixed(0)} us`);
    if (at32.fiveXx + at128.fiveXx > 0) process.exitCode = 1;
  }
} finally {
  await clients.close();
  await stack.stop();
}
