/**
 * Summary of V8 CPU profiles (node --cpu-prof): per profile, which process it is (the service whose
 * code it ran), total samples, self time by package and the top frames by self time. With REQUESTS
 * set, each line also says µs per request (the benchmark's request count through that process).
 *
 *   PROFILE_NODE_OPTIONS='--cpu-prof --cpu-prof-dir=/tmp/prof' node deploy/embedded/dist/with-infra.js -- node scripts/bench-floor.mjs
 *   node scripts/profile-summary.mjs /tmp/prof [TOP=15] [REQUESTS=8298]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2] ?? '/tmp/prof';
const TOP = Number(process.env.TOP ?? 15);
const REQUESTS = Number(process.env.REQUESTS ?? 0);

/** The package a frame belongs to: node_modules/<pkg>, our libs/services, node internals, or V8. */
function packageOf(url, name) {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const ours = /\/(libs|services|deploy)\/([^/]+)\//.exec(url);
  if (ours) return `${ours[1]}/${ours[2]}`;
  if (url.startsWith('node:internal/')) return 'node:internal/' + url.slice('node:internal/'.length).split('/')[0];
  if (url.startsWith('node:')) return 'node:' + url.slice(5).split('/')[0];
  return url;
}

for (const file of readdirSync(dir)
  .filter((f) => f.endsWith('.cpuprofile'))
  .sort()) {
  const profile = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfSamples = new Map();
  for (const id of profile.samples) selfSamples.set(id, (selfSamples.get(id) ?? 0) + 1);
  const totalUs = profile.endTime - profile.startTime;
  const usPerSample = totalUs / profile.samples.length;
  const byPackage = new Map();
  const byFrame = new Map();
  let process = '?';
  for (const [id, count] of selfSamples) {
    const n = byId.get(id);
    const { functionName, url, lineNumber } = n.callFrame;
    const pkg = packageOf(url, functionName);
    const m = /\/services\/([^/]+)\/dist\/main\.js/.exec(url);
    if (m) process = m[1];
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + count);
    const frame = `${functionName || '(anonymous)'} ${url.startsWith('node:') ? url : pkg}${url ? `:${lineNumber + 1}` : ''}`;
    byFrame.set(frame, (byFrame.get(frame) ?? 0) + count);
  }
  if (process === '?') {
    for (const n of profile.nodes) {
      const m = /\/services\/([^/]+)\/dist\//.exec(n.callFrame.url);
      if (m) {
        process = m[1];
        break;
      }
    }
  }
  const idle = (byPackage.get('(idle)') ?? 0) + (byPackage.get('(program)') ?? 0);
  const busy = profile.samples.length - (byPackage.get('(idle)') ?? 0);
  const fmt = (count) => {
    const ms = (count * usPerSample) / 1000;
    const pct = (100 * count) / busy;
    return `${ms.toFixed(0).padStart(6)} ms ${pct.toFixed(1).padStart(5)} %${REQUESTS ? `${((count * usPerSample) / REQUESTS).toFixed(1).padStart(7)} µs/req` : ''}`;
  };
  console.log(
    `\n== ${file}: ${process}, ${(totalUs / 1e6).toFixed(1)} s profiled, busy ${fmt(busy)} (idle+program ${((idle * usPerSample) / 1e6).toFixed(1)} s)`,
  );
  console.log('  by package (self time, % of busy):');
  for (const [pkg, count] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    console.log(`    ${fmt(count)}  ${pkg}`);
  console.log('  top frames (self time):');
  for (const [frame, count] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    console.log(`    ${fmt(count)}  ${frame}`);
}
