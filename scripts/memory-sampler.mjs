/**
 * Preloaded into each service process (NODE_OPTIONS=--import=file://<this file>?dir=<folder>, through
 * PROFILE_NODE_OPTIONS, which deploy/embedded/src/processes.ts passes on; the folder rides in the URL
 * as the processes get no other variable of the caller) by scripts/measure-memory.mjs: every 500 ms
 * one JSON line of the process's memory (RSS, V8 heap used and total, external and array buffers,
 * in bytes) to <folder>/<pid>.jsonl. Not loaded otherwise.
 */
import { appendFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';

const dir = new URL(import.meta.url).searchParams.get('dir');
// services/<name>/dist/main.js → <name>
const name = basename(dirname(dirname(process.argv[1] ?? 'unknown')));
if (dir) {
  const file = `${dir}/${process.pid}.jsonl`;
  const sample = () => {
    const m = process.memoryUsage();
    appendFileSync(
      file,
      `${JSON.stringify({ t: Date.now(), name, rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers })}\n`,
    );
  };
  sample();
  setInterval(sample, 500).unref();
}
