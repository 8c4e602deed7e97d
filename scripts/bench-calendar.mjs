/**
 * Benchmark of GET /api/v1/events through the gateway (not a test): a 31-day window over a
 * calendar with 1,000 recurring series and 200 exceptions.
 *
 * Seeds one tenant through the API (so the occurrence index is built as in production): 1,000
 * series of mixed rules (daily, weekdays, weekly, every two weeks, monthly, COUNT and UNTIL ones)
 * in New York, Berlin and UTC, started within the last year, then 200 `this` edits (exceptions, half
 * of them moved by an hour). Then times sequential GET /events?from&to&calendar_id requests of the
 * first page (default limit 50) and of pages further in (cursor), over real HTTP → gRPC → PostgreSQL,
 * and checks that walking every page gives each occurrence once.
 *
 *   make build && WORKAUTO_KAFKA=off node deploy/embedded/dist/with-infra.js -- node scripts/bench-calendar.mjs
 *   (or `make bench`)
 *
 * Env: SERIES (1000), EXCEPTIONS (200), REQUESTS (300), WARMUP (30). Needs TEST_DATABASE_URL (with-infra sets it).
 */
import { percentile, report, startBenchStack, summarize } from './lib-bench.mjs';

const SERIES = Number(process.env.SERIES ?? 1_000);
const EXCEPTIONS = Number(process.env.EXCEPTIONS ?? 200);
const REQUESTS = Number(process.env.REQUESTS ?? 300);
const WARMUP = Number(process.env.WARMUP ?? 30);
const DAY = 86_400_000;

const { stack, api, createTenant } = await startBenchStack();
try {
  const tenant = await createTenant();
  const key = tenant.api_key;
  const calendar = await api('POST', '/api/v1/calendars', key, { name: 'Bench', timezone: 'America/New_York' });
  const zones = ['America/New_York', 'Europe/Berlin', 'UTC'];
  const rules = [
    'FREQ=DAILY',
    'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR',
    'FREQ=WEEKLY',
    'FREQ=WEEKLY;INTERVAL=2',
    'FREQ=MONTHLY',
    'FREQ=WEEKLY;COUNT=60',
    'FREQ=DAILY;UNTIL=20271231T000000Z',
  ];
  const today = new Date();
  today.setUTCHours(0, 0, 0, 0);
  let t0 = performance.now();
  const series = [];
  const seed = async (i) => {
    // A weekday start so the weekday rule's start is its first occurrence.
    let start = new Date(today.getTime() - (i % 300) * DAY + (8 + (i % 10)) * 3_600_000 + (i % 4) * 900_000);
    while ([0, 6].includes(start.getUTCDay())) start = new Date(start.getTime() + DAY);
    const body = {
      calendar_id: calendar.id,
      title: `Series ${i}`,
      start_at: start.toISOString(),
      end_at: new Date(start.getTime() + 1_800_000).toISOString(),
      timezone: zones[i % zones.length],
      rrule: rules[i % rules.length],
    };
    series[i] = await api('POST', '/api/v1/events', key, body);
  };
  for (let i = 0; i < SERIES; i += 8)
    await Promise.all(Array.from({ length: Math.min(8, SERIES - i) }, (_, j) => seed(i + j)));
  console.log(`seeded ${SERIES} series (${Math.round(performance.now() - t0)} ms)`);

  const from = new Date(today.getTime() + 7 * DAY);
  const to = new Date(from.getTime() + 31 * DAY);
  const qs = `from=${from.toISOString()}&to=${to.toISOString()}&calendar_id=${calendar.id}`;
  t0 = performance.now();
  const inWindow = (await api('GET', `/api/v1/events?${qs}&limit=200`, key)).data.filter((o) => o.series_id);
  for (let i = 0; i < EXCEPTIONS; i++) {
    const o = inWindow[(i * 7) % inWindow.length];
    const moved =
      i % 2 === 0 && o.start_at
        ? {
            start_at: new Date(Date.parse(o.start_at) + 3_600_000).toISOString(),
            end_at: new Date(Date.parse(o.end_at) + 3_600_000).toISOString(),
          }
        : {};
    await api('PUT', `/api/v1/events/${o.series_id}`, key, {
      update_scope: 'this',
      recurrence_id: o.recurrence_id,
      title: `Exception ${i}`,
      ...moved,
    }).catch((err) => {
      if (!String(err).includes('recurrence_id')) throw err; // the same occurrence picked twice: already an exception
    });
  }
  console.log(`made ${EXCEPTIONS} exceptions (${Math.round(performance.now() - t0)} ms)`);

  // Every page once: each occurrence exactly once, in start order.
  const seen = new Set();
  let cursor;
  let pages = 0;
  let last = '';
  const cursors = [];
  do {
    const page = await api('GET', `/api/v1/events?${qs}&limit=200${cursor ? `&cursor=${cursor}` : ''}`, key);
    for (const o of page.data) {
      const k = `${o.id}/${o.recurrence_id ?? ''}`;
      if (seen.has(k)) throw new Error(`occurrence ${k} listed twice`);
      seen.add(k);
      const start = o.start_at ?? o.start_date;
      if (start < last) throw new Error('not in start order');
      last = start;
    }
    pages++;
    cursor = page.has_more ? page.next_cursor : undefined;
    if (cursor) cursors.push(cursor);
  } while (cursor);
  console.log(
    `window ${from.toISOString().slice(0, 10)}..${to.toISOString().slice(0, 10)}: ${seen.size} occurrences in ${pages} pages of 200`,
  );

  const time = async (label, path) => {
    for (let i = 0; i < WARMUP; i++) await api('GET', path, key);
    const ms = [];
    const started = performance.now();
    const cpu = process.cpuUsage();
    for (let i = 0; i < REQUESTS; i++) {
      const s = performance.now();
      await api('GET', path, key);
      ms.push(performance.now() - s);
    }
    // CPU of this process (client, gateway and services share it; PostgreSQL is another process)
    // per request: a figure a busy shared machine inflates far less than wall time.
    const used = process.cpuUsage(cpu);
    console.log(`${label} × ${REQUESTS} (sequential, after ${WARMUP} warm-up):`);
    console.log(
      `  ${summarize(ms)}   ${((REQUESTS / (performance.now() - started)) * 1000).toFixed(1)} req/s   CPU ${((used.user + used.system) / 1000 / REQUESTS).toFixed(1)} ms/request`,
    );
    return percentile(
      ms.sort((a, b) => a - b),
      99,
    );
  };
  const firstPageP99 = await time('GET /api/v1/events (31-day window, first page, limit 50)', `/api/v1/events?${qs}`);
  // make bench's table (docs/benchmarks.md, "Result lines").
  report('calendar_events_p99', 'GET /events, 31-day window, 1,000 series, p99', firstPageP99, 'ms', {
    value: 50,
    better: 'lower',
  });
  await time(
    'GET /api/v1/events (31-day window, a page in the middle via cursor, limit 50)',
    `/api/v1/events?${qs}&cursor=${cursors[Math.floor(cursors.length / 2)]}`,
  );
  await time('GET /api/v1/events (31-day window, first page, limit 200)', `/api/v1/events?${qs}&limit=200`);
  const load = (await import('node:os')).loadavg();
  console.log(
    `machine load average (1/5/15 min): ${load.map((l) => l.toFixed(1)).join(' / ')} on ${(await import('node:os')).cpus().length} cores`,
  );
} finally {
  await stack.stop();
}
