/**
 * A webhook receiver for tests and benchmarks: a node:http server on loopback that records every
 * request and answers as told. Signatures are checked here with node:crypto alone (never with the
 * library that signed them), as an independent receiver would.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** performance.now() when the request's body was complete. */
  at: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  /** Wait this long before answering (a slow receiver). */
  delayMs?: number;
  /** Never answer (a receiver that hangs). */
  hang?: boolean;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** What the n-th request (0-based) gets; default 200. */
  answer: (req: Received, n: number) => Answer;
  /** Resolves when at least `n` requests arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(answer: Receiver['answer'] = () => ({ status: 200 })): Promise<Receiver> {
  const received: Received[] = [];
  const waiters: (() => void)[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: performance.now(),
      };
      const n = received.push(r) - 1;
      for (const w of waiters.splice(0)) w();
      const a = receiver.answer(r, n);
      if (a.hang) return;
      const send = () => {
        if (!res.destroyed) res.writeHead(a.status, a.headers ?? {}).end();
      };
      if (a.delayMs) setTimeout(send, a.delayMs).unref();
      else send();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const receiver: Receiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    answer,
    async waitFor(n, timeoutMs = 15_000) {
      const end = Date.now() + timeoutMs;
      while (received.length < n) {
        if (Date.now() > end)
          throw new Error(`the receiver got ${received.length} of ${n} requests within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 50);
          waiters.push(() => (clearTimeout(t), resolve()));
        });
      }
      return received;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}

/** The base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the secret's base64-decoded part (Standard Webhooks). */
export function expectedSignature(secret: string, id: string, timestamp: string, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
}

/** The v1 signatures of a request, in header order. */
export function signaturesOf(r: Received): string[] {
  return String(r.headers['webhook-signature'] ?? '')
    .split(' ')
    .filter(Boolean)
    .map((s) => {
      const [version, sig] = s.split(',');
      if (version !== 'v1' || !sig) throw new Error(`unexpected signature entry ${s}`);
      return sig;
    });
}

/** Whether `secret` signed the request (one of its signatures), timing-safe. */
export function signedBy(r: Received, secret: string): boolean {
  const want = Buffer.from(
    expectedSignature(secret, String(r.headers['webhook-id']), String(r.headers['webhook-timestamp']), r.body),
  );
  return signaturesOf(r).some((s) => {
    const got = Buffer.from(s);
    return got.length === want.length && timingSafeEqual(got, want);
  });
}
