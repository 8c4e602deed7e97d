/// <reference lib="dom" />
/**
 * What a browser makes of the API (docs/api.md §1, §13), in a real headless Chromium (@sparticuz/chromium,
 * driven by puppeteer-core), one launch for the file:
 * - the reference page /api/v1/docs renders the operations from the OpenAPI document, sends a
 *   request from its "Try it out" panel with an API key, and does all that without a console
 *   error, a CSP violation or a request to another origin;
 * - CORS: a page of an allowed origin reads a response (and its X-Request-Id) of a cross-origin
 *   call with an Authorization header; a page of another origin gets a TypeError, and the gateway
 *   saw only its preflight.
 * Chromium's own `--disable-web-security` default flag is dropped: with it every CORS check passes.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import chromium from '@sparticuz/chromium';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { createClient, unwrap, type WorkautoClient } from '@workauto/client';
import { captureLogs } from '@workauto/testing';
import { startTestStack, type TenantFixture, type TestStack } from './harness.js';

/** A page of its own origin (a loopback port of its own), for the cross-origin calls. */
async function originServer(): Promise<{ origin: string; server: Server }> {
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end('<!doctype html><title>a client app</title><p>another origin</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

async function launch(): Promise<Browser> {
  try {
    return await puppeteer.launch({
      executablePath: await chromium.executablePath(),
      args: chromium.args.filter((a) => a !== '--disable-web-security'),
      headless: 'shell',
    });
  } catch (err) {
    throw new Error(
      `headless Chromium (@sparticuz/chromium) did not start: ${(err as Error).message.slice(0, 300)}. ` +
        'On Debian it needs the libraries libnss3 and libexpat1 (apt-get install libnss3 libexpat1); see README.md, Prerequisites',
      { cause: err },
    );
  }
}

describe('in a real browser', () => {
  let stack: TestStack;
  let tenant: TenantFixture;
  let client: WorkautoClient;
  let browser: Browser;
  let allowed: { origin: string; server: Server };
  let other: { origin: string; server: Server };
  const logs = captureLogs();

  before(async () => {
    [allowed, other] = await Promise.all([originServer(), originServer()]);
    stack = await startTestStack({ gatewayOptions: { corsAllowedOrigins: [allowed.origin] } });
    tenant = await stack.createTenant();
    client = createClient({ baseUrl: stack.url, apiKey: tenant.key });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
    allowed?.server.close();
    other?.server.close();
    logs.stop();
  });

  /** Everything the page does that a user (or its developer console) would notice. */
  async function watch(page: Page) {
    const seen = { consoleErrors: [] as string[], requests: [] as string[] };
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warn') seen.consoleErrors.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => seen.consoleErrors.push(`page error: ${(e as Error).message}`));
    page.on('request', (r) => seen.requests.push(r.url()));
    // CSP violations are events in the page; collected there, read at the end.
    await page.evaluateOnNewDocument(() => {
      const w = window as unknown as { cspViolations: string[] };
      w.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) =>
        w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`),
      );
    });
    return seen;
  }

  it('renders the API reference from the document, runs "Try it out" with an API key, all from this origin under its CSP', async () => {
    const page = await browser.newPage();
    // Puppeteer's 30 s default: a loaded 2-core machine renders the 1 MB document slower than that.
    page.setDefaultTimeout(120_000);
    const seen = await watch(page);
    const res = await page.goto(`${stack.url}/api/v1/docs`, { waitUntil: 'networkidle0' });
    assert.equal(res?.status(), 200);
    assert.match(res?.headers()['content-security-policy'] ?? '', /^default-src 'self'/);

    // The operations, rendered by the browser from /api/v1/openapi.json: a known summary.
    const op = await page.waitForSelector('#operations-notes_tasks-createNote');
    assert.match(await op!.evaluate((el) => el.textContent ?? ''), /Create a note\./);
    assert.ok((await page.$$('.opblock')).length >= 100, 'every operation is listed (the document has over 100)');

    // Authorize with the API key, as a user would.
    await page.click('.scheme-container .btn.authorize');
    await page.type('#auth-bearer-value', tenant.key);
    await page.click('.auth-btn-wrapper .btn.authorize');
    await page.click('.auth-btn-wrapper .btn-done');

    // Try it out: POST /api/v1/notes with a body typed into the panel.
    await page.click('#operations-notes_tasks-createNote .opblock-summary-control');
    await page.waitForSelector('#operations-notes_tasks-createNote .try-out__btn');
    await page.click('#operations-notes_tasks-createNote .try-out__btn');
    const body = await page.waitForSelector('#operations-notes_tasks-createNote textarea.body-param__text');
    await body!.evaluate((el) => (el.value = ''));
    await body!.type('{"title": "Written from the docs page"}');
    await page.click('#operations-notes_tasks-createNote .btn.execute');
    const status = await page.waitForSelector(
      '#operations-notes_tasks-createNote .live-responses-table tr.response .response-col_status',
    );
    assert.equal((await status!.evaluate((el) => el.textContent ?? '')).trim(), '201', 'the panel shows the answer');

    // The gateway received it: the note is there, made with that key.
    const notes = await unwrap(client.GET('/api/v1/notes', { params: { query: { q: 'docs page' } } }));
    assert.deepEqual(
      notes.data.map((n) => n.title),
      ['Written from the docs page'],
    );

    const violations = await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations);
    assert.deepEqual(violations, [], 'no CSP violation');
    assert.deepEqual(seen.consoleErrors, [], 'no console error or warning');
    const origin = new URL(stack.url).origin;
    const foreign = seen.requests.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
    assert.deepEqual(foreign, [], 'no request to another origin');
    assert.ok(seen.requests.includes(`${origin}/api/v1/openapi.json`), 'the document came from the gateway');
    await page.close();
  });

  /** A cross-origin call from a page of `origin`, with a credential (so the browser sends a preflight). */
  async function crossOriginCall(origin: string, title: string) {
    const page = await browser.newPage();
    await page.goto(origin);
    const result = await page.evaluate(
      async (api: string, key: string, noteTitle: string) => {
        try {
          const r = await fetch(`${api}/api/v1/notes`, {
            method: 'POST',
            headers: {
              Authorization: `Bearer ${key}`,
              'Content-Type': 'application/json',
              'Idempotency-Key': `browser-${noteTitle}`,
              'X-Request-Id': `browser-${noteTitle}`,
            },
            body: JSON.stringify({ title: noteTitle }),
          });
          return { status: r.status, requestId: r.headers.get('x-request-id'), rateLimit: r.headers.get('ratelimit') };
        } catch (err) {
          return { error: (err as Error).name };
        }
      },
      stack.url,
      tenant.key,
      title,
    );
    await page.close();
    return result;
  }

  it('CORS: an allowed origin reads the response and its headers; another origin gets a TypeError after only a preflight', async () => {
    const ok = await crossOriginCall(allowed.origin, 'from-the-allowed-origin');
    assert.deepEqual(ok, { status: 201, requestId: 'browser-from-the-allowed-origin', rateLimit: ok.rateLimit });
    assert.match(String(ok.rateLimit), /r=\d+/, 'exposed headers are readable');

    const mark = logs.lines.length;
    const refused = await crossOriginCall(other.origin, 'from-another-origin');
    assert.deepEqual(refused, { error: 'TypeError' });
    const seenByGateway = logs.lines
      .slice(mark)
      .flatMap((line) => line.split('\n').filter(Boolean))
      .flatMap((line) => {
        const entry = JSON.parse(line) as { msg?: string; method?: string; route?: string };
        return entry.msg === 'request' && entry.route === '/api/v1/notes' ? [entry.method] : [];
      });
    assert.deepEqual(seenByGateway, ['OPTIONS'], 'the gateway saw the preflight only');
    const notes = await unwrap(client.GET('/api/v1/notes', { params: { query: { limit: 200 } } }));
    assert.deepEqual(
      notes.data.map((n) => n.title).filter((t) => t.startsWith('from-')),
      ['from-the-allowed-origin'],
    );
  });
});
