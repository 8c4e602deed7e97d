/**
 * CORS (docs/api.md §13) over real HTTP: a gateway with CORS_ALLOWED_ORIGINS set and one without.
 * No downstream is needed: preflights and the headers of refusals are the gateway's own. (The
 * browser's view of the same rules is deploy/embedded's browser test.)
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { createLogger, setLogTarget } from '@workauto/logger';
import { loadConfig } from '@workauto/config';
import { testCallerKeys, testDatabase } from '@workauto/testing';
import { corsAllowedOriginsVar, parseAllowedOrigins } from './cors.js';
import { createGateway, type Gateway } from './index.js';

setLogTarget(new Writable({ write: (_chunk, _enc, done) => done() }));

const APP = 'https://app.example.com';
const ID = '0193a1b2-1111-7e5f-8a9b-0c1d2e3f4a5b';

describe('CORS_ALLOWED_ORIGINS', () => {
  it('takes comma-separated origins and refuses anything else, naming the variable and the entry', () => {
    assert.deepEqual(parseAllowedOrigins(' https://app.example.com, http://localhost:5173/ ,'), [
      APP,
      'http://localhost:5173',
    ]);
    assert.deepEqual(parseAllowedOrigins(''), []);
    for (const bad of [
      'app.example.com',
      'https://app.example.com/path',
      'ftp://x.example',
      'https://a.example?q',
      'https://app_example.com',
      'https://a..example.com',
      'https://-app.example.com',
    ])
      assert.throws(() => parseAllowedOrigins(bad), /is not an origin: write scheme:\/\/host\[:port\]/, bad);
    // A wildcard would be kept as a literal that no browser's Origin matches: the start stops instead.
    for (const wildcard of ['*', 'https://*.example.com', 'https://app.example.com,*', 'http://localhost:*'])
      assert.throws(
        () => parseAllowedOrigins(wildcard),
        /is a wildcard, which is not supported: list each origin exactly/,
        wildcard,
      );
    assert.throws(
      () =>
        loadConfig(
          { CORS_ALLOWED_ORIGINS: corsAllowedOriginsVar() },
          { CORS_ALLOWED_ORIGINS: 'https://*.example.com' },
        ),
      /CORS_ALLOWED_ORIGINS.*is a wildcard/s,
    );
    assert.throws(
      () =>
        loadConfig(
          { CORS_ALLOWED_ORIGINS: corsAllowedOriginsVar() },
          { CORS_ALLOWED_ORIGINS: 'https://ok.example,nope' },
        ),
      /CORS_ALLOWED_ORIGINS.*"nope" is not an origin/s,
    );
  });
});

describe('CORS over HTTP', () => {
  const gateways: Gateway[] = [];
  let base: string;
  let plain: string;

  async function start(corsAllowedOrigins?: string[], rateLimitPerMinute?: number) {
    const g = await createGateway({
      logger: createLogger('gateway'),
      downstreams: {},
      databaseUrl: await testDatabase('gateway_cors'),
      encryptionKeys: `k1:${randomBytes(32).toString('base64')}`,
      callerSigningKey: testCallerKeys.signingKey,
      ...(corsAllowedOrigins ? { corsAllowedOrigins } : {}),
      ...(rateLimitPerMinute ? { rateLimitPerMinute } : {}),
    });
    gateways.push(g);
    return `http://127.0.0.1:${await g.listen('127.0.0.1', 0)}`;
  }
  const preflight = (url: string, origin: string, method = 'POST') =>
    fetch(url, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization' },
    });
  const cors = (res: Response) => [...res.headers.keys()].filter((h) => h.startsWith('access-control-'));

  before(async () => {
    base = await start([APP, 'http://localhost:5173']);
    plain = await start();
  });
  after(async () => {
    for (const g of gateways) await g.close();
  });

  it('answers a preflight from an allowed origin 204, without a credential, with the methods of the path', async () => {
    const res = await preflight(`${base}/api/v1/notes/${ID}`, APP, 'PATCH');
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), APP);
    assert.equal(res.headers.get('vary'), 'Origin');
    assert.deepEqual(res.headers.get('access-control-allow-methods')?.split(', ').sort(), ['DELETE', 'GET', 'PATCH']);
    assert.equal(
      res.headers.get('access-control-allow-headers'),
      'Authorization, Content-Type, Idempotency-Key, X-Request-Id',
    );
    assert.equal(res.headers.get('access-control-max-age'), '600');
    assert.equal(res.headers.get('access-control-allow-credentials'), null, 'no cookies, ever');
    const list = await preflight(`${base}/api/v1/notes`, 'http://localhost:5173');
    assert.deepEqual(list.headers.get('access-control-allow-methods')?.split(', ').sort(), ['GET', 'POST']);
  });

  it('puts Allow-Origin and Expose-Headers on actual responses to an allowed origin, errors included', async () => {
    const res = await fetch(`${base}/api/v1/notes`, { headers: { origin: APP } });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('access-control-allow-origin'), APP);
    assert.equal(
      res.headers.get('access-control-expose-headers'),
      'X-Request-Id, RateLimit, RateLimit-Policy, Retry-After, Idempotent-Replayed',
    );
    assert.equal(res.headers.get('access-control-allow-credentials'), null);
    assert.match(res.headers.get('vary') ?? '', /Origin/);
  });

  it('gives a disallowed origin no Access-Control-* header at all, on preflights and responses', async () => {
    const pre = await preflight(`${base}/api/v1/notes`, 'https://evil.example');
    assert.equal(pre.status, 405, 'the preflight is not answered');
    assert.deepEqual(cors(pre), []);
    const res = await fetch(`${base}/api/v1/notes`, { headers: { origin: 'https://evil.example' } });
    assert.deepEqual(cors(res), []);
  });

  it('sends no CORS header at all when no origin is configured (the default)', async () => {
    const pre = await preflight(`${plain}/api/v1/notes`, APP);
    assert.equal(pre.status, 405);
    assert.deepEqual(cors(pre), []);
    assert.equal(pre.headers.get('vary'), null);
    assert.deepEqual(cors(await fetch(`${plain}/api/v1/notes`, { headers: { origin: APP } })), []);
  });

  it('limits preflights per client address like any request without a credential', async () => {
    const limited = await start([APP], 3);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await preflight(`${limited}/api/v1/notes`, APP)).status);
    assert.deepEqual(statuses, [204, 204, 204, 429, 429]);
    const refused = await preflight(`${limited}/api/v1/notes`, APP);
    assert.equal(refused.headers.get('access-control-allow-origin'), APP, 'a browser can read the 429');
    assert.ok(refused.headers.get('retry-after'));
  });
});
