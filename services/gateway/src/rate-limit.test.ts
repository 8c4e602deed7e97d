/**
 * The per-credential limiter against express-rate-limit configured the same way (one-minute window,
 * draft-8 headers, MemoryStore): the same statuses and headers for the same requests.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import express, { type Response } from 'express';
import { ipKeyGenerator, rateLimit } from 'express-rate-limit';
import { requestCredential } from './auth.js';
import { toHttpError } from './errors.js';
import { limited, rateLimiter } from './rate-limit.js';

const LIMIT = 3;

function send(res: Response, err: unknown): void {
  const http = toHttpError(err, 'request-id');
  for (const [k, v] of Object.entries(http.headers)) res.setHeader(k, v);
  res.status(http.status).json(http.body);
}

const expressRateLimit = rateLimit({
  windowMs: 60_000,
  limit: LIMIT,
  standardHeaders: 'draft-8',
  legacyHeaders: false,
  keyGenerator: (req) => {
    const credential = requestCredential(req);
    return credential ? `t:${credential.key}` : `ip:${ipKeyGenerator(req.ip ?? '')}`;
  },
  handler: limited(send, 'requests for this credential', LIMIT),
});

function serve(limiter: express.RequestHandler) {
  const app = express();
  app.use(limiter, (_req, res) => {
    res.json({ ok: true });
  });
  return app.listen(0, '127.0.0.1');
}

describe('rateLimiter', () => {
  const servers = [serve(expressRateLimit), serve(rateLimiter(LIMIT, send))];
  const urls: string[] = [];
  before(async () => {
    for (const s of servers) {
      if (!s.listening) await once(s, 'listening');
      urls.push(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
    }
  });
  after(() => servers.forEach((s) => s.close()));

  /** What a client sees of one answer; t= (seconds to the window's end) may differ by the second the two stores started in. */
  async function seen(url: string, token: string | undefined) {
    const res = await fetch(`${url}/api/v1/notes`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
    const t = Number(/; t=(\d+)$/.exec(res.headers.get('ratelimit') ?? '')?.[1]);
    return {
      status: res.status,
      rateLimit: res.headers.get('ratelimit')?.replace(/; t=\d+$/, ''),
      policy: res.headers.get('ratelimit-policy'),
      retryAfter: res.headers.get('retry-after'),
      reason: res.status === 429 ? ((await res.json()) as { error: { reason: string } }).error.reason : undefined,
      t,
    };
  }

  it('answers as express-rate-limit did: statuses, RateLimit, RateLimit-Policy, Retry-After', async () => {
    const sequence = ['one', 'one', 'two', 'one', 'one', undefined, 'one', undefined, 'two', undefined, undefined];
    for (const [i, token] of sequence.entries()) {
      const [before, now] = [await seen(urls[0]!, token), await seen(urls[1]!, token)];
      assert.ok(
        Math.abs(before.t - now.t) <= 1 && now.t >= 59 && now.t <= 60,
        `request ${i}: t=${before.t} vs ${now.t}`,
      );
      assert.deepEqual({ ...now, t: 0 }, { ...before, t: 0 }, `request ${i} (${token ?? 'no credential'})`);
    }
    const last = await seen(urls[1]!, 'one');
    assert.equal(last.status, 429);
    assert.equal(last.rateLimit, `"${LIMIT}-in-1min"; r=0`);
  });
});
