/**
 * Per-call balancing in the deployment shape: a Kubernetes headless Service's name resolves to
 * every ready pod's address, all on the same port. Here the replicas are real gRPC servers on
 * 127.0.0.1, 127.0.0.2 and 127.0.0.3 (one port), and the name `notes-tasks.replicas.test` resolves
 * to them (the system lookup is answered for that one name only, as a cluster's DNS would).
 */
import assert from 'node:assert/strict';
import dns from 'node:dns';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { Downstream, grpcTarget } from './client.js';
import { SERVER_CHANNEL_OPTIONS } from './server.js';

const NAME = 'notes-tasks.replicas.test';
const ECHO = { path: '/test.Test/Echo', requestSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b };

let resolvesTo: string[] = [];
const systemLookup = dns.promises.lookup;
dns.promises.lookup = (async (hostname: string, options?: unknown) =>
  hostname === NAME
    ? resolvesTo.map((address) => ({ address, family: 4 }))
    : (systemLookup as (h: string, o?: unknown) => Promise<unknown>)(hostname, options)) as typeof dns.promises.lookup;

interface Replica {
  host: string;
  calls: number;
  server: grpc.Server;
}

async function startReplica(
  host: string,
  port: number,
  options: grpc.ServerOptions = SERVER_CHANNEL_OPTIONS,
): Promise<Replica & { port: number }> {
  const server = new grpc.Server(options);
  const replica = { host, calls: 0, server, port: 0 };
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
    {
      Echo: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        replica.calls++;
        cb(null, Buffer.from(host));
      },
    },
  );
  new HealthImplementation({ '': 'SERVING' }).addToServer(server);
  replica.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return replica;
}

describe('Downstream balancing over replicas', () => {
  const replicas: Replica[] = [];
  const closers: Array<() => void> = [];
  after(() => {
    for (const c of closers) c();
    for (const r of replicas) r.server.forceShutdown();
    dns.promises.lookup = systemLookup;
  });

  async function threeReplicas(options?: grpc.ServerOptions): Promise<{ port: number; set: Replica[] }> {
    const first = await startReplica('127.0.0.1', 0, options);
    const set = [
      first,
      await startReplica('127.0.0.2', first.port, options),
      await startReplica('127.0.0.3', first.port, options),
    ];
    replicas.push(...set);
    return { port: first.port, set };
  }

  it('a host:port address is dialled through DNS; a target with a scheme is kept', () => {
    assert.equal(grpcTarget('notes-tasks:50052'), 'dns:///notes-tasks:50052');
    assert.equal(grpcTarget('127.0.0.1:50052'), 'dns:///127.0.0.1:50052');
    assert.equal(grpcTarget('ipv4:127.0.0.1:1,127.0.0.2:1'), 'ipv4:127.0.0.1:1,127.0.0.2:1');
  });

  it('spreads 300 calls over three replicas behind one name; a plain pick_first client sends them all to one', async () => {
    const { port, set } = await threeReplicas();
    resolvesTo = set.map((r) => r.host);

    // The failure this guards against: grpc-js's default policy pins a client to one replica.
    const plain = new grpc.Client(`${NAME}:${port}`, grpc.credentials.createInsecure());
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

    const client = new Downstream('notes_tasks', `${NAME}:${port}`);
    closers.push(() => client.close());
    for (let i = 0; i < 300; i++) await client.call(ECHO, Buffer.alloc(0));
    const shares = set.map((r) => r.calls);
    console.log(`balancing: 300 calls over three replicas → ${shares.join(' / ')}`);
    for (const n of shares) assert.ok(n >= 60, `every replica gets a share of the calls (got ${shares.join(', ')})`);
  });

  it('finds a replica added after it connected once the servers end old connections (max_connection_age)', async () => {
    // Connections age out every half second here (2 min in production): the grace, 30 s there, must
    // outlast a call on a loaded machine, or the call in flight ends UNAVAILABLE.
    const short = {
      ...SERVER_CHANNEL_OPTIONS,
      'grpc.max_connection_age_ms': 500,
      'grpc.max_connection_age_grace_ms': 5_000,
    };
    const first = await startReplica('127.0.0.4', 0, short);
    const second = await startReplica('127.0.0.5', first.port, short);
    replicas.push(first, second);
    resolvesTo = [first.host, second.host];
    const client = new Downstream('notes_tasks', `${NAME}:${first.port}`, {
      channelOptions: { 'grpc.dns_min_time_between_resolutions_ms': 200 },
    });
    closers.push(() => client.close());
    for (let i = 0; i < 20; i++) await client.call(ECHO, Buffer.alloc(0));

    // A pod scaled up: the headless Service's name now lists it too.
    const added = await startReplica('127.0.0.6', first.port, short);
    replicas.push(added);
    resolvesTo = [first.host, second.host, added.host];
    const until = Date.now() + 10_000;
    while (added.calls === 0 && Date.now() < until) {
      await client.call(ECHO, Buffer.alloc(0));
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(added.calls > 0, 'the added replica receives calls without restarting the client');
  });
});
