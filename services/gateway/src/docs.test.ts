/**
 * The API reference page over HTTP: served without a credential, with its Content-Security-Policy,
 * every asset from the gateway itself. (What a browser makes of it is deploy/embedded's browser test.)
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { createLogger, setLogTarget } from '@workauto/logger';
import { testCallerKeys, testDatabase } from '@workauto/testing';
import { createGateway, type Gateway } from './index.js';

setLogTarget(new Writable({ write: (_chunk, _enc, done) => done() }));

describe('GET /api/v1/docs', () => {
  let gateway: Gateway;
  let base: string;

  before(async () => {
    gateway = await createGateway({
      logger: createLogger('gateway'),
      downstreams: {},
      databaseUrl: await testDatabase('gateway_docs'),
      encryptionKeys: `k1:${randomBytes(32).toString('base64')}`,
      callerSigningKey: testCallerKeys.signingKey,
    });
    base = `http://127.0.0.1:${await gateway.listen('127.0.0.1', 0)}`;
  });
  after(() => gateway?.close());

  it('is an HTML page under a same-origin CSP whose every script, style and icon the gateway serves', async () => {
    const res = await fetch(`${base}/api/v1/docs`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /^default-src 'self'; /);
    assert.doesNotMatch(csp, /https?:|unsafe-eval|script-src/, 'scripts come from this origin only');
    const html = await res.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.equal(assets.length, 4, html);
    for (const asset of assets) {
      assert.match(asset, /^\/api\/v1\/docs\/assets\//, 'no other origin');
      const got = await fetch(`${base}${asset}`);
      assert.equal(got.status, 200, asset);
      assert.ok((await got.arrayBuffer()).byteLength > 0, asset);
    }
    const init = await (await fetch(`${base}/api/v1/docs/assets/init.js`)).text();
    assert.match(init, /url: '\/api\/v1\/openapi\.json'/);
    assert.match(init, /validatorUrl: null/, 'no call to the public validator');
  });

  it('redirects /, /docs and /reference to it, and 404s an unknown asset', async () => {
    for (const path of ['/', '/docs', '/reference']) {
      const res = await fetch(`${base}${path}`, { redirect: 'manual' });
      assert.equal(res.status, 302, path);
      assert.equal(res.headers.get('location'), '/api/v1/docs');
    }
    assert.equal((await fetch(`${base}/api/v1/docs/assets/package.json`)).status, 404);
  });
});
