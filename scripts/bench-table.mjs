/**
 * `make bench`: runs every scripts/bench-*.mjs (or the ones named as arguments) through
 * deploy/embedded's with-infra (its own PostgreSQL and Kafka per script), one after the other,
 * passes their output through, collects their result lines and prints one table: each figure of the
 * performance issue with its target and the ratio measured / target, then the other figures.
 *
 * A result line (docs/benchmarks.md, "Result lines") is one line on a script's stdout:
 *   BENCH-RESULT {"id":"summary_p99","label":"…","value":12.3,"unit":"ms","target":50,"better":"lower"}
 *
 *   make build && node scripts/bench-table.mjs [scripts/bench-floor.mjs …]
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join, relative, resolve } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const WITH_INFRA = join(root, 'deploy/embedded/dist/with-infra.js');

/** The performance issues' targets (docs/benchmarks.md, "Targets"): the figures `make bench` must show, whichever script measures them. */
const EXPECTED = [
  [
    'floor_path_vs_f1',
    'GET /notes/{id} CPU per request, the real path ÷ F1 (the floor)',
    1.15,
    'lower',
    '×',
    'bench-floor.mjs',
  ],
  [
    'floor_gateway_over_f1',
    'gateway CPU per request above F1’s Express + grpc-js client',
    35,
    'lower',
    'µs',
    'bench-floor.mjs',
  ],
  [
    'floor_service_over_f1',
    'notes-tasks CPU per GetNote above F1’s grpc-js server',
    15,
    'lower',
    'µs',
    'bench-floor.mjs',
  ],
  ['floor_pg_vs_f1', 'PostgreSQL CPU per GetNote, the real path ÷ F1', 1.1, 'lower', '×', 'bench-floor.mjs'],
  [
    'mix_cpu_per_request',
    'API mix CPU per request, every process of the product, c=32',
    1800,
    'lower',
    'µs',
    'bench-mix.mjs',
  ],
  ['mix_p99_32', 'API mix p99, c=32', 80, 'lower', 'ms', 'bench-mix.mjs'],
  ['mix_5xx_below_break', 'API mix 5xx at c=32 and c=128', 0, 'lower', 'responses', 'bench-mix.mjs'],
  [
    'mix_unshed_1024',
    'API mix at c=1,024: 5xx not shed as 503 with Retry-After, errors and timeouts',
    0,
    'lower',
    'responses',
    'bench-mix.mjs',
  ],
  ['webhooks_delivery_rate', 'webhook deliveries to a loopback receiver', 1500, 'higher', '/s', 'bench-webhooks.mjs'],
  ['webhooks_delivery_p99', 'webhooks: API → receiver p99', 400, 'lower', 'ms', 'bench-webhooks.mjs'],
  [
    'agent_runs_per_s',
    'agent runs, 1,000 queued at once after a first 1,000 (fresh processes), fake provider',
    200,
    'higher',
    'runs/s',
    'bench-agents.mjs',
  ],
  ['audit_p50', 'change → audit-log entry through Kafka, p50', 25, 'lower', 'ms', 'bench-audit.mjs'],
  ['audit_p99', 'change → audit-log entry through Kafka, p99', 250, 'lower', 'ms', 'bench-audit.mjs'],
  ['summary_p99', 'pipeline summary p99, 1,000,000 deals, through the gateway', 50, 'lower', 'ms', 'bench-summary.mjs'],
  ['calendar_events_p99', 'GET /events, 31-day window, 1,000 series, p99', 50, 'lower', 'ms', 'bench-calendar.mjs'],
].map(([id, label, target, better, unit, script]) => ({ id, label, target, better, unit, script }));

const scriptsDir = join(root, 'scripts');
const scripts =
  process.argv.length > 2
    ? process.argv.slice(2).map((p) => resolve(p))
    : readdirSync(scriptsDir)
        // bench-gateway-ab compares two gateway builds: run by hand, with the second build named (its header).
        .filter((f) => /^bench-.*\.mjs$/.test(f) && !['bench-table.mjs', 'bench-gateway-ab.mjs'].includes(f))
        .sort()
        .map((f) => join(scriptsDir, f));

const results = new Map();
const failed = [];
for (const script of scripts) {
  const name = relative(root, script);
  console.log(`== ${name}`);
  const child = spawn(process.execPath, [WITH_INFRA, '--', process.execPath, script], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let pending = '';
  child.stdout.on('data', (chunk) => {
    process.stdout.write(chunk);
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) collect(line, name);
  });
  const code = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? signal)));
  if (pending) collect(pending, name);
  if (code !== 0) failed.push(`${name} (exit ${code})`);
}

function collect(line, script) {
  if (!line.startsWith('BENCH-RESULT ')) return;
  try {
    const r = JSON.parse(line.slice('BENCH-RESULT '.length));
    if (typeof r.id === 'string' && typeof r.value === 'number') results.set(r.id, { ...r, script });
  } catch {
    console.log(`(an unreadable result line from ${script}: ${line.slice(0, 200)})`);
  }
}

const fmt = (v, unit) =>
  `${v >= 100 ? Math.round(v).toLocaleString('en') : Number(v.toFixed(2))}${unit === '×' ? '×' : ` ${unit}`}`;
function row(label, r, target, better, unit) {
  if (!r) return [label, 'not measured', `${better === 'higher' ? '≥' : '≤'} ${fmt(target, unit)}`, '—', '—'];
  if (target === undefined) return [label, fmt(r.value, r.unit), '—', '—', '—'];
  const met = better === 'higher' ? r.value >= target : r.value <= target;
  return [
    label,
    fmt(r.value, r.unit),
    `${better === 'higher' ? '≥' : '≤'} ${fmt(target, unit)}`,
    target === 0 ? '—' : `${(r.value / target).toFixed(2)}`,
    met ? 'YES' : 'NO',
  ];
}
const rows = EXPECTED.map((e) => {
  const r = results.get(e.id);
  const out = row(e.label, r, e.target, e.better, e.unit);
  if (!r) {
    out[1] = scripts.some((s) => s.endsWith(e.script))
      ? `not measured (${e.script} printed no ${e.id})`
      : existsSync(join(scriptsDir, e.script))
        ? `not run (${e.script})`
        : `not measured (no ${e.script})`;
  }
  return out;
});
const others = [...results.values()]
  .filter((r) => !EXPECTED.some((e) => e.id === r.id))
  .map((r) => row(r.label, r, r.target, r.better, r.unit));

const header = ['figure', 'measured', 'target', 'measured / target', 'met'];
const all = [header, ...rows, ...others];
const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
const line = (r) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
console.log(
  `\nResults (${new Date().toISOString()}, ${(await import('node:os')).cpus().length} CPUs, ${(await import('node:os')).cpus()[0]?.model ?? '?'}):`,
);
console.log(line(header));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const r of rows) console.log(line(r));
if (others.length) {
  console.log(line(['other figures', '', '', '', '']));
  for (const r of others) console.log(line(r));
}
if (failed.length) {
  console.log(`\nfailed: ${failed.join(', ')}`);
  process.exit(1);
}
