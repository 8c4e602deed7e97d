/**
 * Where the CPU went, every process of a benchmark at once, from Linux perf (not a test). V8's own
 * profiler (--cpu-prof, scripts/profile-summary.mjs) samples wall time: a process waiting for a core
 * inside a call is counted in that call. perf samples the CPUs, so each sample is CPU really spent,
 * and it sees what --cpu-prof does not: the garbage collector's and the optimizing compiler's
 * threads, PostgreSQL's backends and the Kafka broker.
 *
 *   PROFILE_NODE_OPTIONS=--perf-basic-prof WARMUP=30 RAMP=0 \
 *     node deploy/embedded/dist/with-infra.js -- node scripts/bench-mix.mjs &
 *   # once the measured level has begun (bench-mix prints the warm-up's line):
 *   perf record -F 499 -a -g -o /tmp/perf.data -- sleep 12
 *   node scripts/perf-summary.mjs /tmp/perf.data [TOP=12]
 *
 * --perf-basic-prof makes each service write /tmp/perf-<pid>.map (and an isolate-*-v8.log in its
 * working directory), which names the JavaScript frames; the map also tells which service a process
 * is. Per process: its share of all samples, then of its own samples the garbage collector's
 * (young and old generation, on any thread), the optimizing compiler's, the kernel's, and the rest
 * (the program: JavaScript, V8's built-ins and runtime, Node's C++, libuv); then its JavaScript
 * functions by inclusive share (a function and what it calls).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const data = process.argv[2] ?? 'perf.data';
const TOP = Number(process.env.TOP ?? 12);

const GC =
  /v8::internal::(Heap::CollectGarbage|ScavengerCollector|Scavenger::|ConcurrentMarking|Sweeper|MarkCompactCollector|MinorMarkSweep|IncrementalMarking|ArrayBufferSweeper)/;
const COMPILER =
  /v8::internal::(OptimizingCompileTaskExecutor|compiler::|maglev::|Compiler::Compile|BaselineBatchCompiler)/;
const NODE_THREAD = /^(MainThread|V8Worker|node|libuv-worker|DelayedTaskSche)/;
const JVM_THREAD = /kafka|data-plane|raft|quorum|broker-|C1 Compiler|C2 Compiler|VM Thread|GC Thread|ExpirationReape/;

/**
 * What a Node process ran, from the frames its perf map names: a script of scripts/ (a benchmark
 * and the processes it forks, e.g. bench-floor's F1, which import the services' modules too), else
 * the service whose code it ran most.
 */
const serviceOf = new Map();
function nameOf(pid, comm) {
  if (comm === 'postgres') return 'postgresql';
  if (!serviceOf.has(pid)) {
    const map = `/tmp/perf-${pid}.map`;
    const text = existsSync(map) ? readFileSync(map, 'utf8') : '';
    const script = /\/scripts\/([a-z-]+)\.mjs/.exec(text);
    const counts = new Map();
    for (const m of text.matchAll(/services\/([a-z-]+)\/dist\//g)) counts.set(m[1], (counts.get(m[1]) ?? 0) + 1);
    serviceOf.set(pid, script ? `${script[1]} ${pid}` : [...counts].sort((a, b) => b[1] - a[1])[0]?.[0]);
  }
  if (serviceOf.get(pid)) return serviceOf.get(pid);
  if (JVM_THREAD.test(comm)) return 'kafka';
  // A Node process without a map (the load generator, with-infra): its threads under one name.
  return NODE_THREAD.test(comm) ? `node ${pid}` : `${comm} ${pid}`;
}

const text = execFileSync('perf', ['script', '-i', data, '-F', 'pid,tid,comm,ip,sym,dso'], {
  maxBuffer: 1 << 30,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'ignore'],
});

const processes = new Map(); // name → { samples, gc, compiler, kernel, js: Map<frame, samples> }
let total = 0;
/** One sample: its header line (comm pid/tid) and its frames, leaf first. */
function account(header, frames) {
  const m = /^\s*(.+?)\s+(\d+)\/(\d+)\s*$/.exec(header);
  if (!m) return;
  total++;
  const name = nameOf(m[2], m[1]);
  let p = processes.get(name);
  if (!p) processes.set(name, (p = { samples: 0, gc: 0, compiler: 0, kernel: 0, js: new Map() }));
  p.samples++;
  if (frames.some((f) => GC.test(f))) p.gc++;
  else if (frames.some((f) => COMPILER.test(f))) p.compiler++;
  else if (frames[0]?.includes('[kernel.kallsyms]')) p.kernel++;
  // JavaScript frames, each counted once per sample however deep it recurses.
  const seen = new Set();
  for (const f of frames) {
    const js = /\bJS:[*+~^']*(.*?) \(\/tmp\/perf-/.exec(f);
    if (js && !seen.has(js[1])) {
      seen.add(js[1]);
      p.js.set(js[1], (p.js.get(js[1]) ?? 0) + 1);
    }
  }
}

let header;
let frames = [];
for (const line of text.split('\n')) {
  if (!line.trim()) {
    if (header) account(header, frames);
    header = undefined;
    frames = [];
  } else if (!header) header = line;
  else frames.push(line.trim().replace(/^[0-9a-f]+\s+/, ''));
}
if (header) account(header, frames);

const pct = (n, of) => `${((100 * n) / of).toFixed(1).padStart(5)} %`;
console.log(`${total} samples (${data})`);
for (const [name, p] of [...processes].sort((a, b) => b[1].samples - a[1].samples)) {
  if (p.samples / total < 0.005) continue;
  const program = p.samples - p.gc - p.compiler - p.kernel;
  console.log(
    `\n${name.padEnd(24)} ${pct(p.samples, total)} of all;  of its own: GC ${pct(p.gc, p.samples)}, ` +
      `compiler ${pct(p.compiler, p.samples)}, kernel ${pct(p.kernel, p.samples)}, program ${pct(program, p.samples)}`,
  );
  for (const [frame, n] of [...p.js].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    console.log(
      `    ${pct(n, p.samples)}  ${frame.replace(/file:\/\/\/?[^ ]*?\/(services|libs|node_modules)\//, '$1/')}`,
    );
}
