/**
 * The gateway's listener as a load balancer and an IPv6-only cluster see it (docs/operations.md,
 * "Keep-alive and addresses"): a connection left idle longer than Node's own 5 s default is still
 * open for the next request, and the gateway answers on IPv6 and IPv4 addresses.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { generateCallerKeys } from '@workauto/grpc';
import { createLogger } from '@workauto/logger';
import { testDatabase } from '@workauto/testing';
import { createGateway, type Gateway } from './index.js';

const gateways: Gateway[] = [];

async function gateway(): Promise<Gateway> {
  const g = await createGateway({
    logger: createLogger('gateway', 'silent'),
    downstreams: {},
    databaseUrl: await testDatabase('gateway'),
    encryptionKeys: `k1:${randomBytes(32).toString('base64')}`,
    callerSigningKey: generateCallerKeys('gateway').signingKey,
  });
  gateways.push(g);
  return g;
}

/** One HTTP/1.1 request written on `socket`; resolves to the response's head, or rejects if the connection ends first. */
function request(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const end = text.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? NaN);
      if (end >= 0 && text.length >= end + 4 + length) {
        cleanup();
        resolve(text.slice(0, end));
      }
    };
    const onEnd = () => {
      cleanup();
      reject(new Error(`the connection ended before the response (${text.length} bytes read)`));
    };
    const cleanup = () => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('error', onEnd);
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    socket.on('error', onEnd);
    socket.write('GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n');
  });
}

describe('gateway listener', () => {
  after(async () => {
    for (const g of gateways) await g.close();
  });

  it('keeps an idle connection open past Node’s 5 s default, and says for how long (65 s)', async () => {
    const port = await (await gateway()).listen('127.0.0.1', 0);
    const socket = connect(port, '127.0.0.1');
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
    const first = await request(socket);
    assert.match(first, /^HTTP\/1\.1 200/);
    assert.match(first, /keep-alive: timeout=65/i);
    // A balancer reuses its connections for up to 60 s; 6 s of idleness is past what Node closes at
    // by default. The connection's close, should it come, is the sentinel.
    const idleSince = Date.now();
    const outcome = await Promise.race([closed, new Promise<'idle'>((r) => setTimeout(() => r('idle'), 6_000))]);
    assert.equal(outcome, 'idle', `the gateway closed the idle connection after ${Number(outcome) - idleSince} ms`);
    assert.match(await request(socket), /^HTTP\/1\.1 200/, 'the connection served a request after 6 s idle');
    socket.destroy();
  });

  it('answers on IPv6 and IPv4 when bound to :: (the default HOST), and on ::1 alone', async () => {
    const dual = await (await gateway()).listen('::', 0);
    assert.equal((await fetch(`http://127.0.0.1:${dual}/healthz`)).status, 200);
    assert.equal((await fetch(`http://[::1]:${dual}/healthz`)).status, 200);
    const v6 = await (await gateway()).listen('::1', 0);
    assert.equal((await fetch(`http://[::1]:${v6}/healthz`)).status, 200);
  });
});
