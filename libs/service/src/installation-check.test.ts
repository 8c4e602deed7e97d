/** The `helm test` check against a real gRPC health server and a real HTTP /readyz on loopback. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';

const run = promisify(execFile);
const script = fileURLToPath(new URL('./installation-check.js', import.meta.url));

describe('installation check (helm test)', () => {
  const grpcServer = new grpc.Server();
  const health = new HealthImplementation({ '': 'SERVING' });
  health.addToServer(grpcServer);
  let readyStatus = 200;
  const http: Server = createServer((req, res) => {
    res.statusCode = req.url === '/readyz' ? readyStatus : 404;
    res.end(JSON.stringify({ status: readyStatus === 200 ? 'ready' : 'shutting down' }));
  });
  after(() => {
    grpcServer.forceShutdown();
    http.close();
  });

  let grpcPort = 0;
  async function check(): Promise<{ code: number; out: string }> {
    grpcPort ||= await new Promise<number>((resolve, reject) =>
      grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    if (!http.listening) await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const httpPort = (http.address() as { port: number }).port;
    const env = {
      ...process.env,
      GATEWAY_URL: `http://127.0.0.1:${httpPort}`,
      GRPC_SERVICES: `identity=127.0.0.1:${grpcPort}`,
    };
    try {
      const { stdout } = await run(process.execPath, [script], { env });
      return { code: 0, out: stdout };
    } catch (err) {
      return { code: (err as { code: number }).code, out: (err as { stdout: string }).stdout };
    }
  }

  it('passes when every service is SERVING and the gateway is ready', async () => {
    const r = await check();
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /ok {3}identity .*SERVING/);
    assert.match(r.out, /ok {3}gateway .* 200/);
  });

  it('fails, naming it, when a service is NOT_SERVING', async () => {
    health.setStatus('', 'NOT_SERVING');
    const r = await check();
    health.setStatus('', 'SERVING');
    assert.equal(r.code, 1);
    assert.match(r.out, /FAIL identity .*health check failing/);
  });

  it('fails when the gateway is not ready', async () => {
    readyStatus = 503;
    const r = await check();
    readyStatus = 200;
    assert.equal(r.code, 1);
    assert.match(r.out, /FAIL gateway .* 503/);
  });
});
