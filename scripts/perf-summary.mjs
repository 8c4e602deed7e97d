/**
 * Where the CPU went, every process of a benchmark at once, from Linux perf (not a test). V8's own
 * profiler (--cpu-prof, scripts/profile-summary.mjs) samples wall time: a process waiting for a core
 * inside a call is counted in that call. perf samples the CPUs, so each sample is CPU really spent,
 * and it sees what --cpu-prof does not: the garbage collector's and the optimizing compiler's
 * threads, PostgreSQL's backends and the Kafka broker.
 *
 *   PROFILE_NODE_OPTIONS=--perf-prof RAMP=0 \
 *     node deploy/embedded/dist/with-infra.js -- node scripts/bench-mix.mjs &
 *   # once the measured level has begun (bench-mix prints the warm-up's line):
 *   perf record -k mono -F 499 -a -g -o /tmp/perf.data -- sleep 12
 *   perf inject --jit -i /tmp/perf.data -o /tmp/perf.jit.data
 *   node scripts/perf-summary.mjs /tmp/perf.jit.data [TOP=12]
 *
 * --perf-prof makes each service write a jit-<pid>.dump in its working directory (the repository's
 * root), which perf inject turns into jitted-<pid>-<n>.so files beside it (git ignores both; delete
 * them after: thousands of files) and the names of the JavaScript frames, code
 * moves included. --perf-basic-prof (a /tmp/perf-<pid>.map, read by perf directly, no -k mono or
 * inject) is simpler but keeps the first name of a code address V8 freed and reused, so a frame can
 * carry another function's name. A process is named by the code its frames run (a script of
 * scripts/, else a service). Per process: its share of all samples, then of its own samples the
 * garbage collector's (young and old generation, on any thread), the optimizing compiler's, the
 * kernel's, and the rest (the program: JavaScript, V8's built-ins and runtime, Node's C++, libuv);
 * then its JavaScript functions by inclusive share (a function and what it calls).
 *
 * BY=module instead lists each process's samples by the code they were in: the nearest JavaScript
 * frame to the sample's leaf (the native code it called counted with it), named by its package,
 * its file of our services and libs, or its Node module; GC and compiler apart. Two processes'
 * lists side by side say what one spends that the other does not (docs/benchmarks.md, "Node's
 * nextTick records": the product's gateway beside F1's).
 */
import { execFileSync } from 'node:child_process';

const data = process.argv[2] ?? 'perf.data';
const TOP = Number(process.env.TOP ?? 12);
const BY_MODULE = process.env.BY === 'module';

const GC =
  /v8::internal::(Heap::CollectGarbage|ScavengerCollector|Scavenger::|ConcurrentMarking|Sweeper|MarkCompactCollector|MinorMarkSweep|IncrementalMarking|ArrayBufferSweeper)/;
const COMPILER =
  /v8::internal::(OptimizingCompileTaskExecutor|compiler::|maglev::|Compiler::Compile|BaselineBatchCompiler)/;
const NODE_THREAD = /^(MainThread|V8Worker|node|libuv-worker|DelayedTaskSche)/;
const JVM_THREAD = /kafka|data-plane|raft|quorum|broker-|C1 Compiler|C2 Compiler|VM Thread|GC Thread|ExpirationReape/;

const text = execFileSync('perf', ['script', '-i', data, '-F', 'pid,tid,comm,ip,sym,dso'], {
  maxBuffer: 1 << 30,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'ignore'],
});

/** A JavaScript frame, named by a perf map (--perf-basic-prof) or a jitdump (--perf-prof, after perf inject --jit). */
const JS_FRAME = /\bJS:[*+~^']*(.*?) \((?:\/tmp\/perf-\d+\.map|[^)]*jitted-\d+-\d+\.so)\)/;

// pid → { comm, samples, gc, compiler, kernel, js: Map<frame, samples>, modules: Map<code, samples>,
//         script, services: Map<name, samples> }
const processes = new Map();
let total = 0;
/** One sample: its header line (comm pid/tid) and its frames, leaf first. */
function account(header, frames) {
  const m = /^\s*(.+?)\s+(\d+)\/(\d+)\s*$/.exec(header);
  if (!m) return;
  total++;
  let p = processes.get(m[2]);
  if (!p)
    processes.set(
      m[2],
      (p = {
        comm: m[1],
        samples: 0,
        gc: 0,
        compiler: 0,
        kernel: 0,
        js: new Map(),
        modules: new Map(),
        services: new Map(),
      }),
    );
  if (JVM_THREAD.test(m[1])) p.comm = m[1];
  p.samples++;
  const gc = frames.some((f) => GC.test(f));
  const compiler = !gc && frames.some((f) => COMPILER.test(f));
  if (gc) p.gc++;
  else if (compiler) p.compiler++;
  else if (frames[0]?.includes('[kernel.kallsyms]')) p.kernel++;
  if (BY_MODULE) {
    const where = gc
      ? '[GC]'
      : compiler
        ? '[compiler]'
        : moduleOf(frames.map((f) => JS_FRAME.exec(f)?.[1]).find(Boolean), frames);
    p.modules.set(where, (p.modules.get(where) ?? 0) + 1);
  }
  // JavaScript frames, each counted once per sample however deep it recurses.
  const seen = new Set();
  for (const f of frames) {
    const js = JS_FRAME.exec(f);
    if (!js || seen.has(js[1])) continue;
    seen.add(js[1]);
    p.js.set(js[1], (p.js.get(js[1]) ?? 0) + 1);
    // Whose code it is: a script of scripts/ (a benchmark and what it forks, e.g. bench-floor's F1,
    // which imports the services' modules too: the script names it) or a service.
    const script = /\/scripts\/([a-z-]+)\.mjs/.exec(js[1])?.[1];
    const service = /\/services\/([a-z-]+)\/dist\//.exec(js[1])?.[1];
    if (script) p.script = script;
    else if (service) p.services.set(service, (p.services.get(service) ?? 0) + 1);
  }
}

/** The code a JavaScript frame is in: a package, a file of our services or libs, a Node module; or native code without one. */
function moduleOf(frame, frames) {
  if (!frame) return frames.some((f) => f.includes('[kernel.kallsyms]')) ? '[kernel, no JS]' : '[native, no JS]';
  const pkg = /node_modules\/(@[^/]+\/[^/]+|[^/]+)\//.exec(frame);
  if (pkg) return pkg[1];
  const ours = /\/(services|libs)\/([^/]+)\/(?:dist\/)?([^:]+)/.exec(frame);
  if (ours) return `${ours[1]}/${ours[2]}/${ours[3]}`;
  const node = /node:(?:internal\/)?([a-z_0-9]+)/.exec(frame);
  return node ? `node:${node[1]}` : 'other JavaScript';
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

/** A process's name: postgresql, kafka, the service or script whose code it ran, else its command and pid. */
function nameOf(pid, p) {
  if (p.comm === 'postgres') return 'postgresql';
  if (JVM_THREAD.test(p.comm)) return 'kafka';
  if (p.script) return `${p.script} ${pid}`;
  const service = [...p.services].sort((a, b) => b[1] - a[1])[0]?.[0];
  if (service) return service;
  return NODE_THREAD.test(p.comm) ? `node ${pid}` : `${p.comm} ${pid}`;
}
// One line per name: PostgreSQL's backends (a process each) summed, and a service's replicas.
const byName = new Map();
for (const [pid, p] of processes) {
  const name = nameOf(pid, p);
  const into = byName.get(name);
  if (!into) byName.set(name, p);
  else {
    for (const k of ['samples', 'gc', 'compiler', 'kernel']) into[k] += p[k];
    for (const [f, n] of p.js) into.js.set(f, (into.js.get(f) ?? 0) + n);
    for (const [f, n] of p.modules) into.modules.set(f, (into.modules.get(f) ?? 0) + n);
  }
}

const pct = (n, of) => `${((100 * n) / of).toFixed(1).padStart(5)} %`;
console.log(`${total} samples (${data})`);
for (const [name, p] of [...byName].sort((a, b) => b[1].samples - a[1].samples)) {
  if (p.samples / total < 0.005) continue;
  const program = p.samples - p.gc - p.compiler - p.kernel;
  console.log(
    `\n${name.padEnd(24)} ${pct(p.samples, total)} of all;  of its own: GC ${pct(p.gc, p.samples)}, ` +
      `compiler ${pct(p.compiler, p.samples)}, kernel ${pct(p.kernel, p.samples)}, program ${pct(program, p.samples)}`,
  );
  for (const [frame, n] of [...(BY_MODULE ? p.modules : p.js)].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    console.log(
      `    ${pct(n, p.samples)}  ${frame.replace(/(file:\/\/)?\/[^ ]*?\/(services|libs|node_modules)\//, '$2/')}`,
    );
}
