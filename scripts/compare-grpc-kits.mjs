/**
 * The gRPC kit (libs/grpc GrpcServer and Downstream) against nice-grpc, in one process on loopback
 * with the notes service's ts-proto definition (GetNote): what a call costs in CPU with each, and
 * what nice-grpc does with the deadlines, errors and unwell services our kit handles. Not a test,
 * and not part of `make bench` (docs/decisions.md, "Our own infrastructure against the libraries").
 *
 *   make build && node scripts/compare-grpc-kits.mjs [check…]
 *
 * Checks (all by default):
 *   cost      µs of CPU per unary call, client and server together, 32 calls in flight, in turns
 *             (CALLS per turn, default 20000; ROUNDS, default 3): grpc-js alone, nice-grpc alone,
 *             nice-grpc with the caller check and error mapping our services need as middleware, our kit
 *   deadline  what a service learns of its caller's deadline, and how its handler hears it pass
 *   errors    what a caller gets when a handler throws a DomainError, a database timeout, a bug
 *   hung      20 calls one after another to a service whose handlers hang (300 ms deadlines)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import {
  CallContext,
  CallerSigner,
  CallerVerifier,
  DomainError,
  Downstream,
  GrpcServer,
  callerAudience,
  decodeStatusDetails,
  errors,
  generateCallerKeys,
  toServiceError,
} from '@workauto/grpc';
import { createLogger } from '@workauto/logger';
import { NotesTasksServiceService as Definition, Note } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { library } from './lib-compare.mjs';

const nice = await library('nice-grpc');
const { deadlineMiddleware } = await library('nice-grpc-client-middleware-deadline');

const SERVICE = 'workauto.notes_tasks.v1.NotesTasksService';
const CALLS = Number(process.env.CALLS ?? 20_000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const IN_FLIGHT = 32;
const keys = generateCallerKeys('compare');
const signer = new CallerSigner(keys.signingKey, { issuer: 'compare' });
const verifier = new CallerVerifier(keys.verifyKeys);
/** One principal (its token is signed once and then reused, as the gateway does), a request id per call. */
const principal = { tenantId: crypto.randomUUID(), actor: { type: 'api_key', id: 'k' } };
const caller = () => ({ requestId: crypto.randomUUID(), ...principal });
const logger = createLogger('compare', 'silent');
const note = Note.fromPartial({
  id: crypto.randomUUID(),
  tenant_id: crypto.randomUUID(),
  title: 'A note',
  body: 'Some text of a note. '.repeat(10),
  metadata: { source: 'compare' },
  created_at: new Date(),
  updated_at: new Date(),
});
const request = { id: note.id };

// ---------------------------------------------------------------------------------------------
// One server and one client per variant: `call()` makes one GetNote with a 5 s deadline.

/** Handlers of every rpc: GetNote answers (or does what `getNote` says), the others are never called. */
const handlersWith = (getNote) =>
  Object.fromEntries(
    Object.keys(Definition).map((k) => [k, k === 'getNote' ? getNote : () => Promise.reject(new Error('not here'))]),
  );

/**
 * Every variant gets the channel options our kit sets (channelz off: grpc-js's per-call bookkeeping
 * for an admin service nothing serves), so the figures compare the frameworks, not that setting.
 */
const NO_CHANNELZ = { 'grpc.enable_channelz': 0 };

async function grpcJs(getNote = async () => note) {
  const server = new grpc.Server(NO_CHANNELZ);
  const impl = handlersWith(getNote);
  server.addService(
    Definition,
    Object.fromEntries(
      Object.entries(impl).map(([k, fn]) => [
        k,
        (call, callback) =>
          fn(call.request, call).then(
            (r) => callback(null, r),
            (err) => callback(err),
          ),
      ]),
    ),
  );
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), NO_CHANNELZ);
  return {
    port,
    call: getNoteCall(client),
    close: () => (client.close(), server.forceShutdown()),
  };
}

/**
 * nice-grpc with `middleware` on the server (none, or ours below) and the deadline middleware on the
 * client (nice-grpc's way to give a call a deadline); `signed` sends a caller token as our gateway does.
 */
async function niceGrpc({ middleware, signed = false, getNote = async () => note } = {}) {
  const server = middleware ? nice.createServer(NO_CHANNELZ).use(middleware) : nice.createServer(NO_CHANNELZ);
  server.add(Definition, handlersWith(getNote));
  const port = await server.listen('127.0.0.1:0');
  const channel = nice.createChannel(`127.0.0.1:${port}`, undefined, NO_CHANNELZ);
  const client = nice.createClientFactory().use(deadlineMiddleware).create(Definition, channel);
  return {
    port,
    call: () =>
      client.getNote(request, {
        deadline: new Date(Date.now() + 5_000),
        ...(signed ? { metadata: niceMetadata(signer.metadata(caller(), SERVICE)) } : {}),
      }),
    close: () => (channel.close(), server.forceShutdown()),
  };
}

/** grpc-js Metadata as nice-grpc's (binary keys carry Buffers). */
function niceMetadata(md) {
  const out = nice.Metadata();
  for (const [key, values] of Object.entries(md.toJSON())) for (const v of values) out.append(key, v);
  return out;
}

/**
 * What our services need from a server, as nice-grpc middleware: the call context only from a
 * verified caller token, and every failure mapped once to a status with its details (errors.ts).
 * (Without the field rules, the metrics and the log line our kit adds.)
 */
async function* ourRulesMiddleware(call, context) {
  try {
    const metadata = { get: (key) => context.metadata.getAll(key) }; // what CallerVerifier reads of grpc-js's Metadata
    const ctx = CallContext.fromCaller(verifier.verify(metadata, callerAudience(call.method.path)), context.signal);
    return yield* call.next(call.request, { ...context, ctx });
  } catch (err) {
    if (err instanceof nice.ServerError) throw err;
    const mapped = toServiceError(err, 'compare.workauto');
    for (const [key, values] of Object.entries(mapped.metadata.toJSON()))
      for (const v of values) context.trailer.append(key, v);
    throw new nice.ServerError(mapped.code, mapped.details);
  }
}

/** Our kit: GrpcServer (caller check, field rules, errors, metrics, health) and a Downstream (breakers, in-flight cap). */
async function ourKit(getNote = async () => note, downstreamOptions = {}) {
  const server = new GrpcServer({
    name: 'compare',
    errorDomain: 'compare.workauto',
    logger,
    protoFiles: [],
    callerVerifier: verifier,
  });
  server.add(SERVICE, Definition, handlersWith(getNote));
  const port = await server.listen('127.0.0.1', 0);
  server.markServing();
  const client = new Downstream('compare', `127.0.0.1:${port}`, downstreamOptions);
  return {
    port,
    call: (opts = {}) =>
      client.call(Definition.getNote, request, { metadata: signer.metadata(caller(), SERVICE), ...opts }),
    client,
    close: async () => (client.close(), await server.shutdown(100)),
  };
}

// ---------------------------------------------------------------------------------------------

const report = (check, subject, result) => console.log(`${check.padEnd(9)} ${subject.padEnd(52)} ${result}`);

async function cost() {
  const variants = [
    ['grpc-js alone (the floor)', () => grpcJs()],
    ['nice-grpc alone (client deadline middleware)', () => niceGrpc()],
    ['nice-grpc + caller check and error mapping', () => niceGrpc({ middleware: ourRulesMiddleware, signed: true })],
    ['our kit (GrpcServer + Downstream)', () => ourKit()],
  ];
  const runs = new Map(variants.map(([label]) => [label, []]));
  const measure = async (v) => {
    let next = 0;
    const worker = async () => {
      while (next++ < CALLS) await v.call();
    };
    const cpu = process.cpuUsage();
    const started = performance.now();
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    const used = process.cpuUsage(cpu);
    return { cpuUs: (used.user + used.system) / CALLS, wallUs: ((performance.now() - started) * 1000) / CALLS };
  };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [label, make] of variants) {
      const v = await make();
      for (let i = 0; i < 2_000; i++) await v.call(); // warm up: connection, JIT, token caches
      runs.get(label).push(await measure(v));
      await v.close();
    }
  }
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [label, rs] of runs) {
    report(
      'cost',
      label,
      `${median(rs.map((r) => r.cpuUs)).toFixed(1)} µs CPU/call (turns: ${rs.map((r) => r.cpuUs.toFixed(0)).join(', ')}); ${median(rs.map((r) => r.wallUs)).toFixed(1)} µs wall/call`,
    );
  }
}

async function deadline() {
  // What the service is told: grpc-js's call.getDeadline() in a plain server's handler.
  let seen; // ms from now to the deadline the call carries (Infinity: none)
  const plain = await grpcJs(async (_req, call) => {
    const d = call.getDeadline();
    seen = (d instanceof Date ? d.getTime() : Number(d)) - Date.now();
    return note;
  });
  const ours = new Downstream('compare', `127.0.0.1:${plain.port}`);
  await ours.call(Definition.getNote, request, { deadlineMs: 300 });
  report('deadline', 'Downstream (300 ms): the service sees', `a deadline ${Math.round(seen)} ms ahead (grpc-timeout)`);
  ours.close();
  const niceClient = nice
    .createClientFactory()
    .use(deadlineMiddleware)
    .create(Definition, nice.createChannel(`127.0.0.1:${plain.port}`));
  await niceClient.getNote(request, { deadline: new Date(Date.now() + 300) });
  report(
    'deadline',
    'nice-grpc client + deadline middleware: the service sees',
    Number.isFinite(seen)
      ? `a deadline ${Math.round(seen)} ms ahead`
      : 'no deadline (no grpc-timeout sent: the client cancels at its own timer)',
  );
  plain.close();

  // How a handler hears the deadline pass (the caller sends one: our Downstream, 300 ms).
  const hear = async (label, start) => {
    let heard;
    const began = performance.now();
    const v = await start(
      (signal) =>
        new Promise((_, reject) =>
          signal.addEventListener('abort', () => {
            heard = { after: performance.now() - began, reason: signal.reason };
            reject(signal.reason);
          }),
        ),
    );
    const client = new Downstream('compare', `127.0.0.1:${v.port}`);
    await client
      .call(Definition.getNote, request, { deadlineMs: 300, metadata: signer.metadata(caller(), SERVICE) })
      .catch(() => undefined);
    await sleep(100);
    const reason = heard?.reason;
    report(
      'deadline',
      label,
      heard
        ? `signal aborted after ${Math.round(heard.after)} ms, reason: ${reason instanceof DomainError ? `DomainError ${reason.reason}` : `${reason?.name} "${reason?.message}"`}`
        : 'signal never aborted',
    );
    client.close();
    await v.close();
  };
  await hear('our kit: the handler’s ctx.signal', (wait) => ourKit((_req, ctx) => wait(ctx.signal)));
  await hear('nice-grpc: the handler’s context.signal', (wait) =>
    niceGrpc({ getNote: (_req, ctx) => wait(ctx.signal) }),
  );
}

async function errorsCheck() {
  const failures = [
    ['a DomainError (errors.notFound)', () => errors.notFound('note', note.id)],
    [
      'a database timeout (SQLSTATE 57014)',
      () => Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
    ],
    ['a bug (TypeError with a secret in its message)', () => new TypeError('cannot read sk_live_123 of undefined')],
  ];
  const describe = (err) => {
    const d = decodeStatusDetails(err);
    return `${grpc.status[d.code]} "${d.message.slice(0, 60)}"${d.reason ? ` reason ${d.reason}` : ' (no details)'}`;
  };
  process.removeAllListeners('warning'); // nice-grpc prints each uncaught handler error's stack as a process warning
  let warnings = 0;
  process.on('warning', () => warnings++);
  for (const [label, make] of failures) {
    const ourV = await ourKit(async () => {
      throw make();
    });
    const ourErr = await ourV.call().catch((e) => e);
    await ourV.close();
    const niceV = await grpcJsClientFor(
      await niceGrpc({
        getNote: async () => {
          throw make();
        },
      }),
    );
    const niceErr = await niceV.call().catch((e) => e);
    niceV.close();
    report('errors', `${label}: our kit`, describe(ourErr));
    report('errors', `${label}: nice-grpc`, describe(niceErr));
  }
  report('errors', 'nice-grpc: process warnings with the error’s stack', String(warnings));
}

/** A grpc-js client (as our gateway's) in front of a server started by one of the variants. */
/** One GetNote through a bare grpc-js client, with a 5 s deadline. */
function getNoteCall(client) {
  const m = Definition.getNote;
  return () =>
    new Promise((resolve, reject) =>
      client.makeUnaryRequest(
        m.path,
        m.requestSerialize,
        m.responseDeserialize,
        request,
        new grpc.Metadata(),
        { deadline: Date.now() + 5_000 },
        (e, r) => (e ? reject(e) : resolve(r)),
      ),
    );
}

async function grpcJsClientFor(v) {
  const client = new grpc.Client(`127.0.0.1:${v.port}`, grpc.credentials.createInsecure());
  return {
    call: getNoteCall(client),
    close: () => (client.close(), v.close()),
  };
}

async function hung() {
  const hang = () => new Promise(() => undefined);
  const run = async (label, call, close) => {
    const outcomes = new Map();
    const started = performance.now();
    for (let i = 0; i < 20; i++) {
      const err = await call().catch((e) => e);
      const key = err?.reason || decodeStatusDetails(err).reason || grpc.status[err?.code];
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    }
    report(
      'hung',
      label,
      `${Math.round(performance.now() - started)} ms; ${[...outcomes].map(([k, n]) => `${n}× ${k}`).join(', ')}`,
    );
    await close();
  };
  const ours = await ourKit(hang, { deadlineMs: 300 });
  await run('our kit (Downstream: breaker per method)', () => ours.call(), ours.close);
  const n = await niceGrpc({ getNote: hang });
  const client = nice
    .createClientFactory()
    .use(deadlineMiddleware)
    .create(Definition, nice.createChannel(`127.0.0.1:${n.port}`));
  await run(
    'nice-grpc client (deadline middleware)',
    () =>
      client
        .getNote(request, { deadline: new Date(Date.now() + 300) })
        .catch((e) => Promise.reject({ code: e.code, metadata: new grpc.Metadata() })),
    n.close,
  );
}

const CHECKS = { cost, deadline, errors: errorsCheck, hung };
const chosen = process.argv.slice(2);
for (const name of chosen.length ? chosen : Object.keys(CHECKS)) {
  if (!CHECKS[name]) throw new Error(`unknown check ${name}: one of ${Object.keys(CHECKS).join(', ')}`);
  await CHECKS[name]();
}
process.exit(0);
