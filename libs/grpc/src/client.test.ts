/**
 * Downstream's circuits against real gRPC servers on loopback: only transport failures count, one
 * failing method does not close the service's others, and a hung service is found within a few calls.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { eventually } from '@workauto/retry/testing';
import { HealthImplementation } from 'grpc-health-check';
import { Downstream } from './client.js';
import { DomainError, MAX_FIELD_VIOLATIONS, decodeStatusDetails, errors, toServiceError } from './errors.js';

const raw = (path: string) => ({
  path,
  requestSerialize: (b: Buffer) => b,
  responseDeserialize: (b: Buffer) => b,
});
const ECHO = raw('/test.Test/Echo');
const BROKEN = raw('/test.Test/Broken');
const HANG = raw('/test.Test/Hang');

type Behaviour = 'ok' | 'internal' | 'hang' | 'answered-unavailable' | 'database-away' | 'huge' | 'hang-for-a';

/** A gRPC server whose methods answer, fail with INTERNAL or never answer; its health check answers or hangs too. */
async function startServer(
  behaviours: Record<string, Behaviour>,
  health: 'serving' | 'hang',
): Promise<{ address: string; server: grpc.Server }> {
  const server = new grpc.Server();
  const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  const impl: grpc.UntypedServiceImplementation = {};
  for (const [name, behaviour] of Object.entries(behaviours)) {
    definition[name] = {
      path: `/test.Test/${name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
    };
    impl[name] = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      reachedServer[name] = (reachedServer[name] ?? 0) + 1;
      call.on('cancelled', () => cancelledOnServer++);
      if (behaviour === 'ok') cb(null, Buffer.from('ok'));
      // One tenant's requests (payload "a") queue behind that tenant's own (never answered here); others are answered.
      else if (behaviour === 'hang-for-a') {
        if (call.request.toString() !== 'a') cb(null, Buffer.from('ok'));
      }
      // An answer over the client's 4 MiB receive limit (a list that forgot to stop its page).
      else if (behaviour === 'huge') cb(null, Buffer.alloc(5 * 1024 * 1024, 1));
      else if (behaviour === 'internal') cb({ code: grpc.status.INTERNAL, details: 'boom' });
      // The service itself answers 503 with a reason (e.g. a third party it asked is down).
      else if (behaviour === 'answered-unavailable')
        cb(toServiceError(errors.unavailable('PROVIDER_DOWN', 'the provider is down'), 'test.workauto'));
      // The service's own database is away (what toServiceError makes of a refused connection).
      else if (behaviour === 'database-away')
        cb(toServiceError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'test.workauto'));
      // 'hang': never answers
    };
  }
  server.addService(definition, impl);
  if (health === 'serving') new HealthImplementation({ '': 'SERVING' }).addToServer(server);
  else {
    server.addService(
      {
        Check: {
          path: '/grpc.health.v1.Health/Check',
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      { Check: () => {} },
    );
  }
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { address: `127.0.0.1:${port}`, server };
}

/** Calls the servers saw cancelled by their client. */
let cancelledOnServer = 0;
/** Calls that reached the servers, by method: a call refused by the client never adds one. */
const reachedServer: Record<string, number> = {};

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => grpc.status.OK,
    (e: { code: number }) => e.code,
  );

describe('Downstream circuit breaker', () => {
  const servers: grpc.Server[] = [];
  const clients: Downstream[] = [];
  after(() => {
    for (const c of clients) c.close();
    for (const s of servers) s.forceShutdown();
  });

  it("never opens on a handler's INTERNAL errors: the service's other calls keep being answered", async () => {
    const { address, server } = await startServer({ Echo: 'ok', Broken: 'internal' }, 'serving');
    servers.push(server);
    const d = new Downstream('svc', address, { volumeThreshold: 3 });
    clients.push(d);
    for (let i = 0; i < 50; i++) assert.equal(await codeOf(d.call(BROKEN, Buffer.alloc(0))), grpc.status.INTERNAL);
    assert.equal(await codeOf(d.call(ECHO, Buffer.alloc(0))), grpc.status.OK);
    assert.equal(
      await codeOf(d.call(BROKEN, Buffer.alloc(0))),
      grpc.status.INTERNAL,
      'still tried, not refused by an open circuit',
    );
  });

  it('never opens on UNAVAILABLE the service answered itself (with a reason): only the way to the service counts', async () => {
    const { address, server } = await startServer({ Echo: 'ok', Answered: 'answered-unavailable' }, 'serving');
    servers.push(server);
    const d = new Downstream('svc', address, { volumeThreshold: 3 });
    clients.push(d);
    const ANSWERED = raw('/test.Test/Answered');
    for (let i = 0; i < 20; i++) {
      const err = await d.call(ANSWERED, Buffer.alloc(0)).catch((e: unknown) => e);
      assert.equal(
        decodeStatusDetails(err as grpc.ServiceError).reason,
        'PROVIDER_DOWN',
        `call ${i} reached the service and kept its reason`,
      );
    }
    assert.equal(d.isDown, false);
  });

  it('still counts the kit\'s own "service unwell" reasons: a service whose database is away is checked and marked down', async () => {
    const { address, server } = await startServer({ Away: 'database-away' }, 'hang');
    servers.push(server);
    const d = new Downstream('svc', address, { volumeThreshold: 3, healthTimeoutMs: 100 });
    clients.push(d);
    const AWAY = raw('/test.Test/Away');
    const first = await d.call(AWAY, Buffer.alloc(0)).catch((e: unknown) => e);
    assert.equal(decodeStatusDetails(first as grpc.ServiceError).reason, 'DATABASE_UNAVAILABLE');
    await eventually('the failure started a health check, which found the service unwell', () => d.isDown);
  });

  it('answers a response over the 4 MiB receive limit as an internal error naming the service, never "retry later" (429)', async () => {
    const { address, server } = await startServer({ Echo: 'ok', Huge: 'huge' }, 'serving');
    servers.push(server);
    const d = new Downstream('calendar', address, { volumeThreshold: 3 });
    clients.push(d);
    for (let i = 0; i < 5; i++) {
      const err = await d.call(raw('/test.Test/Huge'), Buffer.alloc(0)).catch((e: unknown) => e);
      assert.ok(err instanceof DomainError, String(err));
      assert.deepEqual(
        [err.code, err.reason, err.extra.metadata],
        [grpc.status.INTERNAL, 'RESPONSE_TOO_LARGE', { service: 'calendar' }],
      );
    }
    assert.equal(await codeOf(d.call(ECHO, Buffer.alloc(0))), grpc.status.OK, 'a bug of one call closes nothing');
    assert.equal(d.isDown, false);
  });

  it('cancels a call in flight when its signal aborts: the caller gets the reason at once and the service sees the cancel', async () => {
    const { address, server } = await startServer({ Hang: 'hang' }, 'serving');
    servers.push(server);
    // A deadline past any test's timeout: only the abort can end the call before the test fails.
    const d = new Downstream('svc', address, { deadlineMs: 60 * 60_000 });
    clients.push(d);
    const before = cancelledOnServer;
    const reached = reachedServer.Hang ?? 0;
    const controller = new AbortController();
    const reason = new Error('the run was cancelled');
    const calling = d.call(HANG, Buffer.alloc(0), { signal: controller.signal }).catch((e: unknown) => e);
    await eventually('the call reached the service', () => (reachedServer.Hang ?? 0) > reached);
    controller.abort(reason);
    assert.equal(await calling, reason);
    await eventually('the service saw the cancel', () => cancelledOnServer > before);
    assert.equal(cancelledOnServer, before + 1);
    assert.equal(
      await d.call(HANG, Buffer.alloc(0), { signal: AbortSignal.abort(reason) }).catch((e: unknown) => e),
      reason,
      'an aborted signal never starts the call',
    );
    assert.equal(d.isDown, false, 'a cancel is not a failure of the service');
  });

  it("opens a slow method alone while the service's health answers: its other methods keep working", async () => {
    const { address, server } = await startServer({ Echo: 'ok', Hang: 'hang' }, 'serving');
    servers.push(server);
    const d = new Downstream('svc', address, { deadlineMs: 100, volumeThreshold: 3, resetTimeoutMs: 60_000 });
    clients.push(d);
    for (let i = 0; i < 3; i++)
      assert.equal(await codeOf(d.call(HANG, Buffer.alloc(0))), grpc.status.DEADLINE_EXCEEDED);
    const reached = reachedServer.Hang;
    const refused = await d.call(HANG, Buffer.alloc(0)).catch((e: unknown) => e);
    assert.equal(reachedServer.Hang, reached, 'an open circuit answers at once: the call is never sent');
    assert.ok(
      refused instanceof DomainError &&
        refused.code === grpc.status.UNAVAILABLE &&
        refused.reason === 'SERVICE_UNAVAILABLE' &&
        refused.extra.metadata?.cause === 'circuit_open',
      String(refused),
    );
    assert.equal(await codeOf(d.call(ECHO, Buffer.alloc(0))), grpc.status.OK);
    assert.equal(d.isDown, false);
  });

  it('finds a hung service within a few calls and answers 503 at once, naming the service', async () => {
    const { address, server } = await startServer({ Echo: 'hang' }, 'hang');
    servers.push(server);
    const d = new Downstream('notes_tasks', address, { deadlineMs: 300, healthTimeoutMs: 300, resetTimeoutMs: 60_000 });
    clients.push(d);
    const first = await d.call(ECHO, Buffer.alloc(0)).catch((e: unknown) => e);
    assert.ok(first instanceof DomainError && first.code === grpc.status.DEADLINE_EXCEEDED, String(first));
    assert.equal(first.extra.metadata?.service, 'notes_tasks');
    await eventually(
      'the health check that follows the first deadline gets no answer either: the service is down',
      () => d.isDown,
    );
    const reached = reachedServer.Echo;
    const refused = await d.call(ECHO, Buffer.alloc(0)).catch((e: unknown) => e);
    assert.equal(reachedServer.Echo, reached, 'a down service costs no deadline: the call is never sent');
    assert.ok(refused instanceof DomainError);
    assert.equal(refused.reason, 'SERVICE_UNAVAILABLE');
    assert.deepEqual(refused.extra.metadata, { service: 'notes_tasks', cause: 'service_down' });
  });

  it("answers 503 when the service ends the connection under a burst of deadlines, never INTERNAL (the API mix's 500s at 2,048 clients)", async () => {
    // Overload makes many calls pass their deadline at once; grpc-js resets each one (RST_STREAM),
    // and past ~1,000 resets the service's HTTP/2 stack (nghttp2's rapid-reset limit) ends the whole
    // connection with GOAWAY(INTERNAL_ERROR). grpc-js reports the calls still in flight on it as
    // INTERNAL "Received RST_STREAM with code 2 …": the service never answered them.
    const { address, server } = await startServer({ Hang: 'hang' }, 'serving');
    servers.push(server);
    // No in-flight cap here (the next test covers it): the mapping of the lost connection is under test.
    const d = new Downstream('notes_tasks', address, {
      deadlineMs: 30_000,
      resetTimeoutMs: 60_000,
      maxInFlight: 10_000,
    });
    clients.push(d);
    assert.equal(await d.checkHealth(), 'serving'); // connected
    const reached = reachedServer.Hang ?? 0;
    const inFlight = Array.from({ length: 20 }, () => d.call(HANG, Buffer.alloc(0)).catch((e: unknown) => e));
    await eventually('the 20 calls reached the service', () => (reachedServer.Hang ?? 0) - reached === 20);
    const expiring = Array.from({ length: 1_500 }, () =>
      d.call(HANG, Buffer.alloc(0), { deadlineMs: 200 }).catch((e: unknown) => e),
    );
    const outcomes = await Promise.all([...expiring, ...inFlight]);
    const lost: unknown[] = await Promise.all(inFlight);
    assert.ok(
      lost.every((e) => e instanceof DomainError),
      `every call in flight failed when the connection ended: ${String(lost.find((e) => !(e instanceof DomainError)))}`,
    );
    for (const e of outcomes) {
      assert.ok(e instanceof DomainError, `a grpc-js status reached the caller unmapped: ${String(e)}`);
      assert.ok(
        e.code === grpc.status.UNAVAILABLE || e.code === grpc.status.DEADLINE_EXCEEDED,
        `${grpc.status[e.code]}: ${e.message}`,
      );
      assert.equal(e.extra.metadata?.service, 'notes_tasks');
    }
    const broken = lost[0] as DomainError;
    assert.equal(broken.code, grpc.status.UNAVAILABLE);
    assert.equal(broken.reason, 'SERVICE_UNAVAILABLE');
    assert.match(broken.message, /connection to the notes_tasks service was lost.*retry/);
  });

  it('answers 503 SERVICE_OVERLOADED at once past maxInFlight calls, without counting it against the service, and takes calls again as they settle', async () => {
    const { address, server } = await startServer({ Hang: 'hang', Echo: 'ok' }, 'serving');
    servers.push(server);
    const d = new Downstream('notes_tasks', address, { deadlineMs: 1_000, maxInFlight: 3, resetTimeoutMs: 60_000 });
    clients.push(d);
    const held = Array.from({ length: 3 }, () => d.call(HANG, Buffer.alloc(0)).catch((e: unknown) => e));
    const reached = reachedServer.Echo;
    const refused = await d.call(ECHO, Buffer.alloc(0)).catch((e: unknown) => e);
    assert.ok(refused instanceof DomainError, String(refused));
    assert.equal(refused.code, grpc.status.UNAVAILABLE);
    assert.equal(refused.reason, 'SERVICE_OVERLOADED');
    assert.match(refused.message, /notes_tasks service has 3 calls in flight.*retry in a few seconds/);
    assert.equal(reachedServer.Echo, reached, 'refused at once, not after a deadline: the call is never sent');
    await Promise.all(held); // their deadlines pass
    assert.equal(d.isDown, false, 'shedding is not a sign the service is down');
    assert.deepEqual(await d.call(ECHO, Buffer.alloc(0)), Buffer.from('ok'));
  });

  it("never opens on one busy tenant's deadlines alone: another tenant's calls of the same method are still tried", async () => {
    const { address, server } = await startServer({ Queue: 'hang-for-a' }, 'serving');
    servers.push(server);
    const d = new Downstream('notes_tasks', address, { deadlineMs: 200, volumeThreshold: 3, resetTimeoutMs: 60_000 });
    clients.push(d);
    const QUEUE = raw('/test.Test/Queue');
    // Tenant A has 10 calls in flight at once, each running out its deadline (its own queue).
    for (let round = 0; round < 3; round++) {
      const codes = await Promise.all(
        Array.from({ length: 10 }, () => codeOf(d.call(QUEUE, Buffer.from('a'), { tenant: 'A' }))),
      );
      assert.deepEqual([...new Set(codes)], [grpc.status.DEADLINE_EXCEEDED]);
    }
    assert.equal(d.isDown, false, "the service's health answers");
    assert.deepEqual(
      await d.call(QUEUE, Buffer.from('b'), { tenant: 'B' }),
      Buffer.from('ok'),
      "B's call is tried and answered",
    );
  });

  it("still opens on deadlines of calls that are not one busy tenant's: a method that hangs for everyone", async () => {
    const { address, server } = await startServer({ Hang: 'hang' }, 'serving');
    servers.push(server);
    const d = new Downstream('svc', address, { deadlineMs: 100, volumeThreshold: 3, resetTimeoutMs: 60_000 });
    clients.push(d);
    for (let i = 0; i < 3; i++) await codeOf(d.call(HANG, Buffer.alloc(0), { tenant: i % 2 ? 'A' : 'B' }));
    const refused = await d.call(HANG, Buffer.alloc(0), { tenant: 'C' }).catch((e: unknown) => e);
    assert.equal((refused as DomainError).reason, 'SERVICE_UNAVAILABLE', 'refused by the open circuit at once');
  });

  it("answers 429 TENANT_CALLS_LIMITED past one tenant's share of the calls in flight, leaving the other tenants the rest", async () => {
    const { address, server } = await startServer({ Hang: 'hang', Echo: 'ok' }, 'serving');
    servers.push(server);
    const d = new Downstream('agents', address, { deadlineMs: 1_000, maxInFlight: 8, resetTimeoutMs: 60_000 });
    clients.push(d);
    // A quarter of 8: tenant A holds 2 calls.
    const held = Array.from({ length: 2 }, () =>
      d.call(HANG, Buffer.alloc(0), { tenant: 'A' }).catch((e: unknown) => e),
    );
    const refused = await d.call(ECHO, Buffer.alloc(0), { tenant: 'A' }).catch((e: unknown) => e);
    assert.ok(refused instanceof DomainError, String(refused));
    assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(refused.reason, 'TENANT_CALLS_LIMITED');
    assert.equal(refused.extra.metadata?.retry_after_seconds, '1');
    assert.match(refused.message, /this tenant has 2 calls in flight to the agents service.*retry after/);
    assert.deepEqual(await d.call(ECHO, Buffer.alloc(0), { tenant: 'B' }), Buffer.from('ok'), 'B is served');
    await Promise.all(held);
    assert.deepEqual(
      await d.call(ECHO, Buffer.alloc(0), { tenant: 'A' }),
      Buffer.from('ok'),
      'A again, once its calls ended',
    );
  });

  it("comes back by itself once the service's health check answers again", async () => {
    const down = await startServer({ Echo: 'ok' }, 'serving');
    const address = down.address;
    down.server.forceShutdown(); // nothing listens now: connection refused
    const d = new Downstream('svc', address, { resetTimeoutMs: 200 });
    clients.push(d);
    assert.equal(await codeOf(d.call(ECHO, Buffer.alloc(0))), grpc.status.UNAVAILABLE);
    await eventually('the service is marked down', () => d.isDown);
    // The same port serves again.
    const server = new grpc.Server();
    new HealthImplementation({ '': 'SERVING' }).addToServer(server);
    server.addService(
      {
        Echo: {
          path: ECHO.path,
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      { Echo: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from('ok')) },
    );
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())),
    );
    servers.push(server);
    await eventually('the health check finds it back', () => !d.isDown, 20_000, 50);
    assert.equal(await codeOf(d.call(ECHO, Buffer.alloc(0))), grpc.status.OK);
  });
});

describe('field violation cap', () => {
  it('sends at most 50 violations and one "and N more", so hundreds fit the status trailer', async () => {
    const many = Array.from({ length: 600 }, (_, i) => ({
      field: `items[${i}].name`,
      description: 'must not be empty; give each item a name of 1 to 200 characters',
    }));
    const sent = decodeStatusDetails(toServiceError(errors.invalidArgument(many), 'x') as grpc.ServiceError);
    assert.equal(sent.fieldViolations.length, MAX_FIELD_VIOLATIONS + 1);
    assert.match(sent.fieldViolations.at(-1)!.description, /and 550 more/);
    // The same cap applies to a DomainError built by hand.
    const direct = decodeStatusDetails(
      toServiceError(
        new DomainError(grpc.status.INVALID_ARGUMENT, 'INVALID_ARGUMENT', 'bad', { fieldViolations: many }),
        'x',
      ) as grpc.ServiceError,
    );
    assert.equal(direct.fieldViolations.length, MAX_FIELD_VIOLATIONS + 1);

    // Through a real server and client: today's uncapped list is a RST_STREAM (INTERNAL), not the 400.
    const server = new grpc.Server();
    server.addService(
      {
        Bad: {
          path: '/test.Test/Bad',
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      {
        Bad: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(toServiceError(errors.invalidArgument(many), 'x')),
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    const d = new Downstream('svc', `127.0.0.1:${port}`);
    try {
      const err = (await d.call(raw('/test.Test/Bad'), Buffer.alloc(0)).catch((e: unknown) => e)) as grpc.ServiceError;
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT, err.message);
      assert.equal(decodeStatusDetails(err).fieldViolations.length, MAX_FIELD_VIOLATIONS + 1);
    } finally {
      d.close();
      server.forceShutdown();
    }
  });
});
