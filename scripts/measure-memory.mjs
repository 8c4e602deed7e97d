/**
 * RSS and V8 heap of every process of the deployment shape (each service's main.js in its own
 * process), for docs/benchmarks.md ("Memory") and the chart's requests and limits. Not a test.
 *
 *   node deploy/embedded/dist/with-infra.js -- node scripts/measure-memory.mjs idle
 *   node deploy/embedded/dist/with-infra.js -- node scripts/measure-memory.mjs run -- node scripts/bench-mix.mjs
 *   node deploy/embedded/dist/with-infra.js -- node scripts/measure-memory.mjs run -- node --test deploy/embedded/dist/e2e/noisy-neighbour.test.js
 *
 * `idle`: the stack started, seeded with nothing, sampled for IDLE seconds (20) after it is ready.
 * `run -- <command>`: the command (whose service processes start through processes.ts) with every
 * service process sampled. scripts/memory-sampler.mjs is preloaded into each (PROFILE_NODE_OPTIONS);
 * the table has, per kind of process, the most any one process of it used (max RSS, max heap used)
 * and its RSS at the last sample.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SAMPLER = new URL('./memory-sampler.mjs', import.meta.url);
const mode = process.argv[2];
const dir = mkdtempSync(join(tmpdir(), 'workauto-memory-'));
/** Named time windows of the run (bench-mix's levels), each summarized apart. */
const phases = [];
SAMPLER.searchParams.set('dir', dir);
process.env.PROFILE_NODE_OPTIONS = `--import=${SAMPLER.href}`;

if (mode === 'idle') {
  const { startBenchStack } = await import('./lib-bench.mjs');
  const { stack } = await startBenchStack({ shape: 'processes' });
  await new Promise((r) => setTimeout(r, Number(process.env.IDLE ?? 20) * 1000));
  await stack.stop();
} else if (mode === 'run') {
  const command = process.argv.slice(process.argv.indexOf('--') + 1);
  const child = spawn(command[0], command.slice(1), { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
  // bench-mix prints a line at the end of each level ("  c=  32 …"): the samples since the one
  // before are that level's.
  let since = Date.now();
  child.stdout.on('data', (d) => {
    process.stdout.write(d);
    for (const line of d.toString().split('\n')) {
      const level = /^\s+c=\s*(\d+)/.exec(line)?.[1];
      if (level) {
        phases.push({ name: `c=${level}`, from: since, to: Date.now() });
        since = Date.now();
      }
    }
  });
  const [code] = await once(child, 'exit');
  if (code !== 0) console.error(`measure-memory: the command exited ${code}; the samples taken are below`);
} else {
  console.error('usage: measure-memory.mjs idle | run -- <command…>');
  process.exit(2);
}

const mib = (b) => (b / 1024 / 1024).toFixed(0);
const files = readdirSync(dir).map((f) =>
  readFileSync(join(dir, f), 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l)),
);
function table(title, from = 0, to = Infinity) {
  const byName = new Map();
  for (const all of files) {
    const samples = all.filter((s) => s.t >= from && s.t <= to);
    if (!samples.length) continue;
    const name = samples[0].name;
    const row = byName.get(name) ?? { processes: 0, maxRss: 0, maxHeap: 0, lastRss: 0 };
    row.processes++;
    row.maxRss = Math.max(row.maxRss, ...samples.map((s) => s.rss));
    row.maxHeap = Math.max(row.maxHeap, ...samples.map((s) => s.heapUsed));
    row.lastRss = Math.max(row.lastRss, samples.at(-1).rss);
    byName.set(name, row);
  }
  console.log(`\nmemory (${title}): process | processes | max RSS MiB | max heap used MiB | RSS at the end MiB`);
  for (const [name, r] of [...byName].sort())
    console.log(`| ${name} | ${r.processes} | ${mib(r.maxRss)} | ${mib(r.maxHeap)} | ${mib(r.lastRss)} |`);
}
for (const p of phases) table(p.name, p.from, p.to);
table(`${mode}, the whole run`);
rmSync(dir, { recursive: true, force: true });
