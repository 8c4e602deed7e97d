/**
 * Per-call balancing and discovery in the deployment shape: a Kubernetes headless Service's name
 * resolves to every ready pod's address, all on the same port. Here the replicas are real gRPC
 * servers on 127.0.0.x (one port per test), and the name `notes-tasks.replicas.test` resolves to the
 * ones listed in `resolvesTo` (the system lookup is answered for that one name only, as a cluster's
 * DNS would, following the pods that are ready).
 */
import assert from 'node:assert/strict';
import dns from 'node:dns';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { eventually } from '@workauto/retry/testing';
import { HealthImplementation } from 'grpc-health-check';
import { Downstream, grpcTarget } from './client.js';
import { SERVER_CHANNEL_OPTIONS } from './server.js';

const NAME = 'notes-tasks.replicas.test';
const ECHO = { path: '/test.Test/Echo', requestSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b };
const RAW = { requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b };
const RAW_OUT = { responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b };

let resolvesTo: string[] = [];
const systemLookup = dns.promises.lookup;
dns.promises.lookup = (async (hostname: string, options?: unknown) =>
  hostname === NAME
    ? resolvesTo.map((address) => ({ address, family: 4 }))
    : (systemLookup as (h: string, o?: unknown) => Promise<unknown>)(hostname, options)) as typeof dns.promises.lookup;

interface Replica {
  host: string;
  port: number;
  calls: number;
  server: grpc.Server;
  health?: HealthImplementation;
}

/**
 * A replica answering Echo with its host. `echo: 'hang'` never answers (a stopped process);
 * `healthDelayMs` answers its health check that late (a process short of CPU), `'hang'` never.
 */
async function startReplica(
  host: string,
  port: number,
  opts: { echo?: 'ok' | 'hang'; health?: 'serving' | 'hang' | { delayMs: number } } = {},
): Promise<Replica> {
  const server = new grpc.Server(SERVER_CHANNEL_OPTIONS);
  const replica: Replica = { host, calls: 0, server, port: 0 };
  server.addService(
    { Echo: { path: ECHO.path, requestStream: false, responseStream: false, ...RAW, ...RAW_OUT } },
    {
      Echo: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        replica.calls++;
        if (opts.echo !== 'hang') cb(null, Buffer.from(host));
      },
    },
  );
  const health = opts.health ?? 'serving';
  if (health === 'serving') {
    replica.health = new HealthImplementation({ '': 'SERVING' });
    replica.health.addToServer(server);
  } else {
    const SERVING = Buffer.from([0x08, 0x01]); // HealthCheckResponse{status: SERVING}
    server.addService(
      {
        Check: {
          path: '/grpc.health.v1.Health/Check',
          requestStream: false,
          responseStream: false,
          ...RAW,
          ...RAW_OUT,
        },
      },
      {
        Check: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          if (health !== 'hang') setTimeout(() => cb(null, SERVING), health.delayMs);
        },
      },
    );
  }
  replica.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return replica;
}

/** Calls `call` until `done()`, `concurrency` at a time; resolves to the failures' codes. */
async function keepCalling(call: () => Promise<unknown>, done: () => boolean, concurrency = 8): Promise<number[]> {
  const failures: number[] = [];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!done()) {
        await call().catch((e: { code?: number }) => failures.push(e.code ?? -1));
        await sleep(5);
      }
    }),
  );
  return failures;
}

describe('Downstream balancing over replicas', () => {
  const replicas: Replica[] = [];
  const closers: Array<() => void> = [];
  after(() => {
    for (const c of closers) c();
    for (const r of replicas) r.server.forceShutdown();
    dns.promises.lookup = systemLookup;
  });
  const start = async (host: string, port: number, opts?: Parameters<typeof startReplica>[2]) => {
    const r = await startReplica(host, port, opts);
    replicas.push(r);
    return r;
  };
  const client = (port: number, options: ConstructorParameters<typeof Downstream>[2] = {}) => {
    const d = new Downstream('notes_tasks', `${NAME}:${port}`, options);
    closers.push(() => d.close());
    return d;
  };

  it('a host:port address is dialled through the refreshing DNS resolver; a target with a scheme is kept', () => {
    assert.equal(grpcTarget('notes-tasks:50052'), 'workauto-dns:///notes-tasks:50052');
    assert.equal(grpcTarget('127.0.0.1:50052'), 'workauto-dns:///127.0.0.1:50052');
    assert.equal(grpcTarget('ipv4:127.0.0.1:1,127.0.0.2:1'), 'ipv4:127.0.0.1:1,127.0.0.2:1');
    assert.equal(grpcTarget('dns:///notes-tasks:50052'), 'dns:///notes-tasks:50052');
  });

  it('spreads 300 calls over three replicas behind one name; a plain pick_first client sends them all to one', async () => {
    const first = await start('127.0.0.1', 0);
    const set = [first, await start('127.0.0.2', first.port), await start('127.0.0.3', first.port)];
    resolvesTo = set.map((r) => r.host);

    // The failure this guards against: grpc-js's default policy pins a client to one replica.
    const plain = new grpc.Client(`${NAME}:${first.port}`, grpc.credentials.createInsecure());
    closers.push(() => plain.close());
    for (let i = 0; i < 30; i++) {
      await new Promise((resolve, reject) =>
        plain.makeUnaryRequest(ECHO.path, ECHO.requestSerialize, ECHO.responseDeserialize, Buffer.alloc(0), (e, r) =>
          e ? reject(e) : resolve(r),
        ),
      );
    }
    assert.deepEqual(
      set.map((r) => r.calls).filter((n) => n > 0),
      [30],
      'pick_first uses a single replica',
    );
    for (const r of set) r.calls = 0;

    const d = client(first.port);
    for (let i = 0; i < 300; i++) await d.call(ECHO, Buffer.alloc(0));
    const shares = set.map((r) => r.calls);
    console.log(`balancing: 300 calls over three replicas → ${shares.join(' / ')}`);
    for (const n of shares) assert.ok(n >= 60, `every replica gets a share of the calls (got ${shares.join(', ')})`);
  });

  it('finds a replica added after it connected within its resolve interval, while every connection stays open', async () => {
    const first = await start('127.0.0.4', 0);
    const second = await start('127.0.0.5', first.port);
    resolvesTo = [first.host, second.host];
    const d = client(first.port, { resolveEveryMs: 200 });
    for (let i = 0; i < 20; i++) await d.call(ECHO, Buffer.alloc(0));

    // A pod scaled up: the headless Service's name now lists it too. No connection ends (the
    // servers' max_connection_age is minutes away): only the client's own re-resolution finds it.
    const added = await start('127.0.0.6', first.port);
    resolvesTo = [first.host, second.host, added.host];
    await eventually('the added replica receives calls without restarting the client', async () => {
      await d.call(ECHO, Buffer.alloc(0));
      return added.calls > 0;
    });
  });

  it('a rolling restart of two replicas (surge, out of DNS, then drained) fails no call', async () => {
    const a = await start('127.0.0.7', 0);
    const b = await start('127.0.0.8', a.port);
    resolvesTo = [a.host, b.host];
    const d = client(a.port, { resolveEveryMs: 200 });
    let rolled = false;
    const calling = keepCalling(
      () => d.call(ECHO, Buffer.alloc(0)),
      () => rolled,
    );
    await sleep(200);
    // What a Deployment's rollout does with maxSurge 1, maxUnavailable 0 and a preStop sleep: the
    // new pod is ready and listed; the old one leaves the name, keeps serving through the sleep,
    // then drains (NOT_SERVING, GOAWAY, calls in flight finish) and exits.
    const replace = async (old: Replica, host: string) => {
      const fresh = await start(host, a.port);
      resolvesTo = [...resolvesTo.filter((h) => h !== old.host), fresh.host];
      await sleep(600); // the preStop sleep: longer than the resolve interval
      old.health!.setStatus('', 'NOT_SERVING');
      await new Promise<void>((resolve) => old.server.tryShutdown(() => resolve()));
      return fresh;
    };
    const a2 = await replace(a, '127.0.0.9');
    const b2 = await replace(b, '127.0.0.10');
    a2.calls = 0;
    b2.calls = 0;
    await sleep(300);
    rolled = true;
    const failures = await calling;
    console.log(`rolling restart of two replicas: ${failures.length} failed calls`);
    assert.deepEqual(failures, [], 'no call failed');
    assert.ok(a2.calls > 0 && b2.calls > 0, 'the new replicas take the calls');
    assert.equal(d.isDown, false);
  });

  it('a replica that stops answering is left out while the others serve: the service is never marked down', async () => {
    const live = await start('127.0.0.11', 0, { health: { delayMs: 1_300 } });
    const hung = await start('127.0.0.12', live.port, { echo: 'hang', health: 'hang' });
    resolvesTo = [live.host, hung.host];
    // The live replica answers its health check late (a process short of CPU: slower than the
    // check's 1 s deadline, within the second try's 2 s); the hung one never answers.
    const d = client(live.port, { healthTimeoutMs: 1_000, deadlineMs: 500 });
    /** The codes of `n` calls one after the other (0 for OK). */
    const codes = async (n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++)
        out.push(
          await d.call(ECHO, Buffer.alloc(0)).then(
            () => 0,
            (e: { code: number }) => e.code,
          ),
        );
      return out;
    };
    assert.ok((await codes(8)).includes(grpc.status.DEADLINE_EXCEEDED), 'calls picked the hung replica');
    // Once the checks are done, the hung replica gets no more calls and the live one answers them all.
    const hungAddress = `${hung.host}:${hung.port}`;
    await eventually('the hung replica is left out', () => d.addressesLeftOut.includes(hungAddress), 20_000, 50);
    assert.deepEqual(d.addressesLeftOut, [hungAddress], 'the hung replica is left out, the slow one is not');
    hung.calls = 0;
    const after = await codes(40);
    assert.equal(d.isDown, false, 'a live replica keeps the service up');
    assert.deepEqual(
      after.filter((c) => c !== 0),
      [],
      'every call after the check succeeds',
    );
    assert.equal(hung.calls, 0, 'the hung replica is left out');
  });
});
