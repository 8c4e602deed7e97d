/**
 * CPU of the caller token's metadata as the gateway makes it per request (CallerSigner.metadata:
 * the cached token of the request's principal, and the request's fields beside it), two builds of
 * libs/grpc in one process, alternating rounds (docs/benchmarks.md, "Changes of issue 36"). The
 * caller is built as the gateway builds it: the request's fields, then its principal's tenant and
 * actor, frozen and made once per looked-up principal (services/gateway proxy.ts addPrincipal).
 * Not a test.
 *
 *   node scripts/measure-caller-token.mjs <checkout A> <checkout B>
 *
 * Env: N (calls per round, 200,000), ROUNDS (10).
 */
const dirs = process.argv.slice(2);
if (dirs.length !== 2) throw new Error('name two built checkouts: measure-caller-token.mjs <A> <B>');
const N = Number(process.env.N ?? 200_000);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const libs = await Promise.all(dirs.map((d) => import(`${d}/libs/grpc/dist/caller-identity.js`)));
const keys = libs[0].generateCallerKeys('gateway-1');
const signers = libs.map((l) => new l.CallerSigner(keys.signingKey, { issuer: 'gateway' }));
const AUDIENCE = 'workauto.notes_tasks.v1.NotesTasksService';
const principal = Object.freeze({
  tenantId: '0193a1b2-0000-7000-8000-00000000000a',
  actor: Object.freeze({
    type: 'api_key',
    id: '0193a1b2-0000-7000-8000-00000000000b',
    memberId: '0193a1b2-0000-7000-8000-00000000000c',
    access: Object.freeze({ notes: 'write', tasks: 'write', crm: 'read', calendar: 'write' }),
  }),
});
const caller = (i) => ({
  requestId: `0193a1b2-0000-7000-8000-${String(i).padStart(12, '0')}`,
  clientIp: '127.0.0.1',
  userAgent: 'autocannon',
  ...principal,
});

/** ns of this process's CPU per call. */
function round(i) {
  const start = process.cpuUsage();
  for (let n = 0; n < N; n++) signers[i].metadata(caller(n), AUDIENCE);
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / N;
}

const results = [[], []];
for (let r = 0; r < ROUNDS; r++) for (const i of r % 2 ? [1, 0] : [0, 1]) results[i].push(round(i));
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const i of [0, 1])
  console.log(
    `${dirs[i]}: ${median(results[i]).toFixed(0)} ns per call (rounds ${results[i].map((x) => x.toFixed(0)).join(' ')})`,
  );
