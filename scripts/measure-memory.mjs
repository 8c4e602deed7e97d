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
import { fileURLToPath } from 'node:url';

const SAMPLER = fileURLToPath(new URL('./memory-sampler.mjs', import.meta.url));
const mode = process.argv[2];
const dir = mkdtempSync(join(tmpdir(), 'workauto-memory-'));
process.env.MEMORY_SAMPLES_DIR = dir;
process.env.PROFILE_NODE_OPTIONS = `--import=${SAMPLER}`;

if (mode === 'idle') {
  const { startBenchStack } = await import('./lib-bench.mjs');
  const { stack } = await startBenchStack({ shape: 'processes' });
  await new Promise((r) => setTimeout(r, Number(process.env.IDLE ?? 20) * 1000));
  await stack.stop();
} else if (mode === 'run') {
  const command = process.argv.slice(process.argv.indexOf('--') + 1);
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit', env: process.env });
  const [code] = await once(child, 'exit');
  if (code !== 0) console.error(`measure-memory: the command exited ${code}; the samples taken are below`);
} else {
  console.error('usage: measure-memory.mjs idle | run -- <command…>');
  process.exit(2);
}

const mib = (b) => (b / 1024 / 1024).toFixed(0);
const byName = new Map();
for (const f of readdirSync(dir)) {
  const samples = readFileSync(join(dir, f), 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  if (!samples.length) continue;
  const name = samples[0].name;
  const row = byName.get(name) ?? { processes: 0, maxRss: 0, maxHeap: 0, lastRss: 0 };
  row.processes++;
  row.maxRss = Math.max(row.maxRss, ...samples.map((s) => s.rss));
  row.maxHeap = Math.max(row.maxHeap, ...samples.map((s) => s.heapUsed));
  row.lastRss = Math.max(row.lastRss, samples.at(-1).rss);
  byName.set(name, row);
}
console.log(`\nmemory (${mode}): process | processes | max RSS MiB | max heap used MiB | RSS at the end MiB`);
for (const [name, r] of [...byName].sort())
  console.log(`| ${name} | ${r.processes} | ${mib(r.maxRss)} | ${mib(r.maxHeap)} | ${mib(r.lastRss)} |`);
rmSync(dir, { recursive: true, force: true });
