import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { after, describe, it } from 'node:test';
import { ConfigError } from '@workauto/config';
import { DomainError } from '@workauto/grpc';
import {
  EgressConnectionError,
  EgressError,
  EgressPolicy,
  EgressRefusedError,
  EgressResponseTooLargeError,
  EgressTimeoutError,
  type ResolvedAddress,
} from './index.js';
import { TEST_CERTIFICATE, TEST_PRIVATE_KEY } from './test-certificate.js';

/** Asserts checkUrl refuses with the kit's 400 naming the field; returns the description. */
function refusal(policy: EgressPolicy, url: string, field = 'url'): string {
  try {
    policy.checkUrl(url, field);
  } catch (err) {
    assert.ok(err instanceof DomainError, `${url}: expected a DomainError, got ${String(err)}`);
    assert.equal(err.reason, 'INVALID_ARGUMENT');
    assert.equal(err.extra.fieldViolations?.[0]?.field, field);
    return err.extra.fieldViolations[0].description;
  }
  assert.fail(`${url} was allowed`);
}

/** A receiver on loopback that counts the connections and requests it sees. */
interface Receiver {
  port: number;
  connections: number;
  /** Connections closed (by either side) so far. */
  closed: number;
  /** Resolves when the next connection closes. */
  nextClose(): Promise<void>;
  requests: { method: string; url: string; body: string }[];
  close(): Promise<void>;
}

async function receiver(
  options: { tls?: boolean; handle?: (req: http.IncomingMessage, res: http.ServerResponse) => void } = {},
): Promise<Receiver> {
  const handle = options.handle ?? ((_req, res) => res.end('ok'));
  const server = options.tls
    ? https.createServer({ cert: TEST_CERTIFICATE, key: TEST_PRIVATE_KEY })
    : http.createServer();
  const state: Receiver = {
    port: 0,
    connections: 0,
    closed: 0,
    nextClose: () => new Promise((resolve) => server.once('connection-closed', resolve)),
    requests: [],
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  server.on('connection', (socket: net.Socket) => {
    state.connections++;
    socket.on('close', () => {
      state.closed++;
      server.emit('connection-closed');
    });
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      state.requests.push({ method: req.method ?? '', url: req.url ?? '', body });
      handle(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  return state;
}

/** An https receiver on loopback, and a policy under which the name rebound.test resolves to it. */
async function reboundReceiver() {
  const target = await receiver({ tls: true });
  after(() => target.close());
  const policy = new EgressPolicy({
    resolve: resolver({ 'rebound.test': [v4('127.0.0.1')] }),
    extraCaCertificates: [TEST_CERTIFICATE],
  });
  after(() => policy.close());
  return { target, policy };
}

/** A receiver that never answers, one that sends its status and part of a body then stalls, and a policy that may reach both. */
async function stallingReceivers() {
  const silent = await receiver({ handle: () => {} });
  after(() => silent.close());
  const stalls = await receiver({
    handle: (_req, res) => {
      res.writeHead(200);
      res.write('partial');
    },
  });
  after(() => stalls.close());
  const policy = new EgressPolicy({ allowPrivate: true });
  after(() => policy.close());
  return { silent, stalls, policy };
}

/** A resolver answering from a fixed table, standing in for DNS (nothing resolves offline). */
function resolver(table: Record<string, ResolvedAddress[]>) {
  return async (hostname: string) => table[hostname] ?? [];
}
const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
const v6 = (address: string): ResolvedAddress => ({ address, family: 6 });

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  return assert.fail('expected the call to fail');
}

describe('checkUrl (when a tenant writes a URL)', () => {
  const policy = new EgressPolicy();
  after(() => policy.close());

  it('refuses every non-public address of docs/operations.md, in every spelling, with a 400 that says how to allow it', () => {
    const refused = [
      'https://127.0.0.1/',
      'https://127.255.255.254/',
      'https://10.1.2.3/',
      'https://172.16.0.1/',
      'https://172.31.255.255/',
      'https://192.168.1.1/',
      'https://169.254.169.254/latest/meta-data/',
      'https://[fe80::1]/',
      'https://100.64.0.1/',
      'https://0.0.0.0/',
      'https://0.1.2.3/',
      'https://192.0.0.8/',
      'https://198.18.0.1/',
      'https://198.19.255.255/',
      'https://224.0.0.1/',
      'https://239.255.255.250/',
      'https://240.0.0.1/',
      'https://255.255.255.255/',
      'https://[::]/',
      'https://[::1]/',
      'https://[fc00::1]/',
      'https://[fd12:3456::1]/',
      // IPv4-mapped and -compatible IPv6
      'https://[::ffff:127.0.0.1]/',
      'https://[::ffff:7f00:1]/',
      'https://[::ffff:169.254.169.254]/',
      'https://[::ffff:10.0.0.1]/',
      'https://[::127.0.0.1]/',
      // 6to4 and NAT64 forms
      'https://[2002:7f00:1::]/',
      'https://[2002:a9fe:a9fe::1]/',
      'https://[64:ff9b::7f00:1]/',
      'https://[64:ff9b::a00:1]/',
      // numeric IPv4 forms mean the address they spell
      'https://2130706433/',
      'https://0x7f.1/',
      'https://017700000001/',
      'https://127.1/',
      'https://0/',
      // RFC 6761 names
      'https://localhost/',
      'https://localhost:8443/x',
      'https://a.localhost/',
      'https://LOCALHOST./',
    ];
    for (const url of refused) {
      const description = refusal(policy, url);
      assert.match(description, /only https URLs to public \(global unicast\) addresses are allowed/, url);
      assert.match(description, /EGRESS_ALLOW_PRIVATE=true.*EGRESS_ALLOWED_CIDRS/, url);
    }
  });

  it('says which address a URL means and what kind it is', () => {
    assert.match(refusal(policy, 'https://0x7f.1/'), /^127\.0\.0\.1 is a loopback address/);
    assert.match(refusal(policy, 'https://[::ffff:a9fe:a9fe]/'), /link-local.*169\.254\.169\.254 written as IPv6/);
    assert.match(refusal(policy, 'https://10.0.0.1/'), /private address/);
    assert.match(refusal(policy, 'https://a.localhost/'), /loopback name/);
  });

  it('names the field it checks', () => {
    refusal(policy, 'https://127.0.0.1/mcp', 'mcp_server_url');
  });

  it('refuses plain http unless private destinations are allowed', () => {
    assert.match(refusal(policy, 'http://hooks.example.com/'), /must use https, not http.*EGRESS_ALLOW_PRIVATE=true/);
  });

  it('refuses other schemes, userinfo, over-long and malformed URLs whatever the policy', () => {
    const permissive = new EgressPolicy({ allowPrivate: true });
    after(() => permissive.close());
    for (const p of [policy, permissive]) {
      assert.match(refusal(p, 'ftp://files.example.com/'), /must use https \(got ftp:\)/);
      assert.match(refusal(p, 'file:///etc/passwd'), /must use https \(got file:\)/);
      assert.match(refusal(p, 'https://user:secret@hooks.example.com/'), /user name or password/);
      assert.match(refusal(p, 'https://user@hooks.example.com/'), /user name or password/);
      assert.match(refusal(p, `https://hooks.example.com/${'a'.repeat(2030)}`), /at most 2048 characters \(got 2056\)/);
      assert.match(refusal(p, 'hooks.example.com/x'), /must be an absolute URL/);
    }
    assert.equal(policy.checkUrl(`https://hooks.example.com/${'a'.repeat(2048 - 26)}`, 'url').href.length, 2048);
  });

  it('refuses whitespace and control characters anywhere in a URL, whatever the policy (the URL parser drops tabs and newlines silently)', () => {
    const permissive = new EgressPolicy({ allowPrivate: true });
    after(() => permissive.close());
    for (const p of [policy, permissive]) {
      for (const url of [
        'https://hooks.example.com/a\r\nX-Injected: 1',
        'https://hooks.example.com/a\nb',
        'https://hooks.example.com/a\tb',
        'https://hooks.example.com/a b',
        ' https://hooks.example.com/',
        'https://hooks.example.com/\r\n',
        'https://hooks.example.com/\u0000',
        'https://hooks.example.com/\u007f',
        'https://hooks.example.com/\u00a0',
        'https://hooks.\u2028example.com/',
      ]) {
        assert.match(
          refusal(p, url, 'mcp_server_url'),
          /must not contain whitespace or control characters; percent-encode them/,
          JSON.stringify(url),
        );
      }
    }
  });

  it('allows https to host names and public addresses, IPv4 embedded in IPv6 included, and returns the parsed URL', () => {
    for (const url of [
      'https://hooks.example.com/workauto?x=1',
      'https://1.1.1.1/',
      'https://8.8.8.8:8443/hook',
      'https://[2606:4700:4700::1111]/',
      'https://[::ffff:8.8.8.8]/',
      'https://[2002:808:808::1]/',
      'https://[64:ff9b::808:808]/',
    ]) {
      assert.equal(policy.checkUrl(url, 'url').href, new URL(url).href, url);
    }
  });

  it('with private destinations allowed, takes http, loopback and localhost', () => {
    const permissive = new EgressPolicy({ allowPrivate: true });
    after(() => permissive.close());
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost:3000/mcp',
      'https://10.0.0.1/',
      'http://[::1]/',
    ]) {
      permissive.checkUrl(url, 'url');
    }
  });

  it('with EGRESS_ALLOWED_CIDRS, allows those ranges (in any spelling) over https while the rest stay refused', () => {
    const ranged = EgressPolicy.fromEnv({ EGRESS_ALLOWED_CIDRS: '127.0.0.0/8, fd00::/8' });
    after(() => ranged.close());
    ranged.checkUrl('https://127.0.0.1:8443/', 'url');
    ranged.checkUrl('https://[::ffff:127.0.0.1]/', 'url');
    ranged.checkUrl('https://2130706433/', 'url');
    ranged.checkUrl('https://[fd00::5]/', 'url');
    assert.match(refusal(ranged, 'https://10.0.0.1/'), /private address/);
    assert.match(refusal(ranged, 'https://[::1]/'), /loopback/);
    assert.match(refusal(ranged, 'http://127.0.0.1/'), /must use https/);
  });
});

describe('EgressPolicy.fromEnv', () => {
  it('defaults to refusing private destinations', async () => {
    const policy = EgressPolicy.fromEnv({});
    assert.equal(policy.allowPrivate, false);
    await policy.close();
    const open = EgressPolicy.fromEnv({ EGRESS_ALLOW_PRIVATE: 'true' });
    assert.equal(open.allowPrivate, true);
    await open.close();
  });

  it('stops start-up naming the variable when a value is bad', () => {
    assert.throws(
      () => EgressPolicy.fromEnv({ EGRESS_ALLOW_PRIVATE: 'yes' }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, /EGRESS_ALLOW_PRIVATE: expected true or false \(got "yes"\)/);
        return true;
      },
    );
    for (const bad of ['10.0.0.0/8,intranet', '10.0.0.0/33', '0x0a.0.0.0/8', '10.0.0.0', 'fd00::/129']) {
      assert.throws(
        () => EgressPolicy.fromEnv({ EGRESS_ALLOWED_CIDRS: bad }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, bad);
          assert.match(
            err.message,
            /EGRESS_ALLOWED_CIDRS: ".*" is not a CIDR range; expected a comma-separated list like 10\.0\.0\.0\/8,fd00::\/8/,
            bad,
          );
          return true;
        },
      );
    }
  });
});

describe('fetch (at every connection)', () => {
  it('refuses a host name that resolves to loopback, and the receiver there sees nothing (DNS rebinding)', async () => {
    const { target, policy } = await reboundReceiver();
    const url = `https://rebound.test:${target.port}/hook`;
    policy.checkUrl(url, 'url'); // passes when written: the name is not resolved then
    const err = await rejection(policy.fetch(url, { method: 'POST', body: '{}' }));
    assert.ok(err instanceof EgressRefusedError, String(err));
    // The rule, never the address: a tenant must not map internal names to addresses through failure texts.
    assert.match(
      err.message,
      /^destination not allowed: the host rebound\.test resolves to a loopback address, which the egress policy refuses; .*EGRESS_ALLOWED_CIDRS/,
    );
    assert.equal(err.message.includes('127.0.0.1'), false, err.message);
    assert.equal(target.connections, 0);
    assert.equal(target.requests.length, 0);
  });

  it('refuses when any of the addresses a name resolves to is refused, in either family', async () => {
    const policy = new EgressPolicy({
      resolve: resolver({
        'mixed4.test': [v4('1.1.1.1'), v4('10.0.0.7')],
        'mixed6.test': [v6('2606:4700:4700::1111'), v6('::ffff:169.254.169.254')],
        'mixed.test': [v4('1.1.1.1'), v6('fd00::1')],
      }),
    });
    after(() => policy.close());
    for (const [name, why, address] of [
      ['mixed4.test', /mixed4\.test resolves to a private address/, '10.0.0.7'],
      ['mixed6.test', /mixed6\.test resolves to a link-local address.*written as IPv6/, '169.254.169.254'],
      ['mixed.test', /mixed\.test resolves to a unique-local/, 'fd00::1'],
    ] as const) {
      const err = await rejection(policy.fetch(`https://${name}/`));
      assert.ok(err instanceof EgressRefusedError, `${name}: ${String(err)}`);
      assert.match(err.message, why);
      assert.equal(err.message.includes(address), false, err.message);
    }
  });

  it('refuses a literal address, plain http, or whitespace and control characters before connecting', async () => {
    const target = await receiver();
    after(() => target.close());
    const policy = new EgressPolicy();
    after(() => policy.close());
    const permissive = new EgressPolicy({ allowPrivate: true });
    after(() => permissive.close());
    for (const [p, url] of [
      [policy, `https://127.0.0.1:${target.port}/`],
      [policy, `https://2130706433:${target.port}/`],
      [policy, `http://hooks.example.com:${target.port}/`],
      [permissive, `http://127.0.0.1:${target.port}/a\r\nX-Injected: 1`],
      [permissive, `http://127.0.0.1:${target.port}/a\tb`],
    ] as const) {
      const err = await rejection(p.fetch(url));
      assert.ok(err instanceof EgressRefusedError, `${url}: ${String(err)}`);
      assert.match(err.message, /^destination not allowed: /);
    }
    assert.equal(target.connections, 0);
  });

  it('with EGRESS_ALLOW_PRIVATE=true, reaches a loopback receiver over plain http', async () => {
    const target = await receiver({ handle: (_req, res) => res.writeHead(202).end('accepted') });
    after(() => target.close());
    const policy = EgressPolicy.fromEnv({ EGRESS_ALLOW_PRIVATE: 'true' });
    after(() => policy.close());
    const res = await policy.fetch(`http://127.0.0.1:${target.port}/hook`, {
      method: 'POST',
      body: '{"a":1}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 202);
    assert.equal(await res.text(), 'accepted');
    assert.deepEqual(target.requests, [{ method: 'POST', url: '/hook', body: '{"a":1}' }]);
  });

  it('with EGRESS_ALLOWED_CIDRS=127.0.0.0/8, reaches loopback over https while a name resolving into 10/8 stays refused', async () => {
    const target = await receiver({ tls: true });
    after(() => target.close());
    const policy = EgressPolicy.fromEnv(
      { EGRESS_ALLOWED_CIDRS: '127.0.0.0/8' },
      {
        resolve: resolver({ 'receiver.test': [v4('127.0.0.1')], 'intranet.test': [v4('10.0.0.1')] }),
        extraCaCertificates: [TEST_CERTIFICATE],
      },
    );
    after(() => policy.close());
    assert.equal((await policy.fetch(`https://127.0.0.1:${target.port}/a`)).status, 200);
    assert.equal((await policy.fetch(`https://receiver.test:${target.port}/b`)).status, 200);
    assert.deepEqual(
      target.requests.map((r) => r.url),
      ['/a', '/b'],
    );
    const err = await rejection(policy.fetch(`https://intranet.test:${target.port}/`));
    assert.ok(err instanceof EgressRefusedError, String(err));
    assert.match(err.message, /intranet\.test resolves to a private address/);
    assert.equal(err.message.includes('10.0.0.1'), false, err.message);
  });

  it('says why it would refuse a URL without dialling it: its form, its literal host, or an address its name resolves to', async () => {
    const policy = new EgressPolicy({
      allowedCidrs: ['127.0.0.0/8'],
      resolve: resolver({ 'receiver.test': [v4('127.0.0.1')], 'intranet.test': [v4('8.8.8.8'), v4('10.0.0.1')] }),
    });
    after(() => policy.close());
    assert.equal(await policy.refusal('https://receiver.test/authorize'), undefined);
    assert.equal(await policy.refusal('https://127.0.0.1:8443/token'), undefined);
    assert.equal(
      await policy.refusal('https://unknown.test/x'),
      undefined,
      'a name that does not resolve is no refusal',
    );
    assert.match((await policy.refusal('http://receiver.test/x'))!, /must use https/);
    assert.match((await policy.refusal('https://169.254.169.254/latest'))!, /link-local/);
    const named = (await policy.refusal('https://intranet.test/.well-known/oauth-protected-resource'))!;
    assert.match(named, /intranet\.test resolves to a private address/);
    assert.equal(named.includes('10.0.0.1'), false, named);
  });

  it('reads a body up to maxResponseBytes and no further: past it the body fails, the caller is told, the connection drops', async () => {
    const total = 64 * 1024 * 1024;
    let sent = 0;
    let finished = false;
    let closed!: () => void;
    const serverClosed = new Promise<void>((resolve) => (closed = resolve));
    const target = await receiver({
      handle: (req, res) => {
        if (req.url === '/small') return void res.end('x'.repeat(1000));
        res.on('close', () => closed());
        const chunk = Buffer.alloc(64 * 1024, 'x');
        const pump = () => {
          while (sent < total && !res.destroyed) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          if (!res.destroyed) res.end(() => (finished = true));
        };
        pump();
      },
    });
    after(() => target.close());
    const policy = new EgressPolicy({ allowPrivate: true });
    after(() => policy.close());
    const told: EgressResponseTooLargeError[] = [];
    const limits = { maxResponseBytes: 1000, onResponseTooLarge: (e: EgressResponseTooLargeError) => told.push(e) };

    assert.equal((await (await policy.fetch(`http://127.0.0.1:${target.port}/small`, limits)).text()).length, 1000);
    const res = await policy.fetch(`http://127.0.0.1:${target.port}/big`, limits);
    assert.equal(res.status, 200);
    const err = await rejection(res.text());
    assert.ok(err instanceof EgressResponseTooLargeError, String(err));
    assert.match(
      err.message,
      /^the answer of http:\/\/127\.0\.0\.1:\d+ is larger than 1000 bytes; it was not read further$/,
    );
    assert.deepEqual(told, [err]);
    await serverClosed;
    assert.equal(finished, false, 'the connection closed before the server could finish');
    assert.ok(sent < total / 4, `the server wrote ${sent} of ${total} bytes`);
  });

  it('returns a redirect as the response and never follows it', async () => {
    const elsewhere = await receiver();
    after(() => elsewhere.close());
    const target = await receiver({
      handle: (_req, res) => res.writeHead(302, { location: `http://127.0.0.1:${elsewhere.port}/stolen` }).end(),
    });
    after(() => target.close());
    const policy = new EgressPolicy({ allowPrivate: true });
    after(() => policy.close());
    const res = await policy.fetch(`http://127.0.0.1:${target.port}/hook`, { method: 'POST', body: 'x' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), `http://127.0.0.1:${elsewhere.port}/stolen`);
    assert.equal(elsewhere.requests.length, 0);
  });

  it('gives up after the total timeout with EgressTimeoutError, before the response and while reading the body', async () => {
    const { silent, stalls, policy } = await stallingReceivers();

    // The receiver never answers: only the timeout ends the call.
    const err = await rejection(policy.fetch(`http://127.0.0.1:${silent.port}/`, { timeoutMs: 200 }));
    assert.ok(err instanceof EgressTimeoutError, String(err));
    assert.match(err.message, /no complete response from http:\/\/127\.0\.0\.1:\d+ within 200 ms/);

    const res = await policy.fetch(`http://127.0.0.1:${stalls.port}/`, { timeoutMs: 300 });
    const bodyErr = await rejection(res.text());
    assert.ok(bodyErr instanceof EgressTimeoutError, String(bodyErr));
    // The caller's own abort stays the caller's: not a timeout of the destination.
    const aborted = await rejection(policy.fetch(`http://127.0.0.1:${silent.port}/`, { signal: AbortSignal.abort() }));
    assert.ok(!(aborted instanceof EgressError), String(aborted));
    assert.equal((aborted as Error).name, 'AbortError');
  });

  it('gives up connecting after the connect timeout with EgressTimeoutError', async () => {
    const policy = new EgressPolicy({ connectTimeoutMs: 200, timeoutMs: 10_000, resolve: () => new Promise(() => {}) });
    after(() => policy.close());
    // The name never resolves: only a timeout ends the call, and the message says it was the connect timeout's.
    const err = await rejection(policy.fetch('https://slow-dns.test/'));
    assert.ok(err instanceof EgressTimeoutError, String(err));
    assert.match(err.message, /UND_ERR_CONNECT_TIMEOUT/);
  });

  it('reports a connection failure as EgressConnectionError, neither refused nor timed out', async () => {
    const closed = await receiver();
    const port = closed.port;
    await closed.close();
    const policy = new EgressPolicy({ allowPrivate: true, resolve: resolver({}) });
    after(() => policy.close());
    const refusedConnection = await rejection(policy.fetch(`http://127.0.0.1:${port}/`));
    assert.ok(refusedConnection instanceof EgressConnectionError, String(refusedConnection));
    assert.match(refusedConnection.message, /could not reach http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/);
    // Reached by name, the text says what happened, not the address the name resolved to.
    const named = new EgressPolicy({ allowPrivate: true, resolve: resolver({ 'down.test': [v4('127.0.0.1')] }) });
    after(() => named.close());
    const byName = await rejection(named.fetch(`http://down.test:${port}/`));
    assert.ok(byName instanceof EgressConnectionError, String(byName));
    assert.match(
      byName.message,
      /^could not reach http:\/\/down\.test:\d+: the connection was refused.*\(ECONNREFUSED\)$/,
    );
    assert.equal(byName.message.includes('127.0.0.1'), false, byName.message);
    const unknownName = await rejection(policy.fetch('http://nowhere.test/'));
    assert.ok(unknownName instanceof EgressConnectionError, String(unknownName));
    assert.match(unknownName.message, /nowhere\.test has no address/);
  });
});

describe('request (the delivery path: the same policy without fetch)', () => {
  it('refuses a host name that resolves to loopback at connection, and a refused URL before it', async () => {
    const { target, policy } = await reboundReceiver();
    const err = await rejection(
      policy.request(`https://rebound.test:${target.port}/hook`, { method: 'POST', body: '{}' }),
    );
    assert.ok(err instanceof EgressRefusedError, String(err));
    assert.equal(err.message.includes('127.0.0.1'), false, err.message);
    const literal = await rejection(policy.request(`https://127.0.0.1:${target.port}/hook`, { method: 'POST' }));
    assert.ok(literal instanceof EgressRefusedError, String(literal));
    assert.equal(target.connections, 0);
  });

  it('sends method, path, query, headers and body; returns status and headers; a redirect is returned, never followed', async () => {
    const elsewhere = await receiver();
    after(() => elsewhere.close());
    const target = await receiver({
      handle: (req, res) =>
        req.url === '/moved'
          ? res.writeHead(302, { location: `http://127.0.0.1:${elsewhere.port}/stolen` }).end()
          : res.writeHead(429, { 'retry-after': '7', 'x-seen': String(req.headers['webhook-id']) }).end('slow down'),
    });
    after(() => target.close());
    const policy = new EgressPolicy({ allowPrivate: true });
    after(() => policy.close());
    const res = await policy.request(`http://127.0.0.1:${target.port}/hook?e=3`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' },
      body: '{"a":1}',
    });
    assert.deepEqual([res.status, res.headers['retry-after'], res.headers['x-seen']], [429, '7', 'msg_1']);
    await res.discardBody(1024);
    assert.deepEqual(target.requests[0], { method: 'POST', url: '/hook?e=3', body: '{"a":1}' });
    const moved = await policy.request(`http://127.0.0.1:${target.port}/moved`, { method: 'POST' });
    assert.equal(moved.status, 302);
    await moved.discardBody(1024);
    assert.equal(elsewhere.requests.length, 0);
  });

  it('reuses connections after short answers, and drops the one an answer past the limit came on', async () => {
    const target = await receiver({ handle: (req, res) => res.end(req.url === '/long' ? 'x'.repeat(100_000) : 'ok') });
    after(() => target.close());
    const policy = new EgressPolicy({ allowPrivate: true });
    after(() => policy.close());
    const send = async (path: string) =>
      (await policy.request(`http://127.0.0.1:${target.port}${path}`, { method: 'POST', body: '{}' })).discardBody(
        1024,
      );
    for (let i = 0; i < 10; i++) await send('/');
    assert.ok(target.connections <= 2, `10 short answers took ${target.connections} connections`);
    assert.equal(target.closed, 0);
    const closing = target.nextClose();
    await send('/long');
    await closing;
    assert.equal(target.closed, 1);
  });

  it('gives up after the total timeout with EgressTimeoutError; a body that stalls is discarded at the timeout; the caller’s abort stays the caller’s', async () => {
    const { silent, stalls, policy } = await stallingReceivers();
    const err = await rejection(policy.request(`http://127.0.0.1:${silent.port}/`, { method: 'POST', timeoutMs: 200 }));
    assert.ok(err instanceof EgressTimeoutError, String(err));
    assert.match(err.message, /no complete response from http:\/\/127\.0\.0\.1:\d+ within 200 ms/);
    const res = await policy.request(`http://127.0.0.1:${stalls.port}/`, { method: 'POST', timeoutMs: 300 });
    assert.equal(res.status, 200);
    await res.discardBody(1024); // resolves once the timeout cut the body off
    const caller = new AbortController();
    const pending = rejection(
      policy.request(`http://127.0.0.1:${silent.port}/`, { method: 'POST', signal: caller.signal }),
    );
    caller.abort(new Error('the worker is stopping'));
    const aborted = await pending;
    assert.ok(!(aborted instanceof EgressError), String(aborted));
    assert.equal((aborted as Error).message, 'the worker is stopping');
  });

  it('reports a connection failure as EgressConnectionError without the address', async () => {
    const closed = await receiver();
    const port = closed.port;
    await closed.close();
    const policy = new EgressPolicy({ allowPrivate: true, resolve: resolver({ 'down.test': [v4('127.0.0.1')] }) });
    after(() => policy.close());
    const err = await rejection(policy.request(`http://down.test:${port}/`, { method: 'POST' }));
    assert.ok(err instanceof EgressConnectionError, String(err));
    assert.match(
      err.message,
      /^could not reach http:\/\/down\.test:\d+: the connection was refused.*\(ECONNREFUSED\)$/,
    );
  });
});

describe("fetchWhole (the providers' SDKs: fetch's signature, the answer read whole)", () => {
  it('refuses a host name that resolves to loopback at connection, and a refused URL before it', async () => {
    const { target, policy } = await reboundReceiver();
    const err = await rejection(policy.fetchWhole(`https://rebound.test:${target.port}/v1/chat`, { method: 'POST' }));
    assert.ok(err instanceof EgressRefusedError, String(err));
    assert.equal(err.message.includes('127.0.0.1'), false, err.message);
    const literal = await rejection(policy.fetchWhole(`https://127.0.0.1:${target.port}/v1/chat`));
    assert.ok(literal instanceof EgressRefusedError, String(literal));
    assert.equal(target.connections, 0);
  });

  it('sends method, path, headers and body; answers a Response with status, headers and body; a redirect is returned, never followed', async () => {
    const elsewhere = await receiver();
    after(() => elsewhere.close());
    const seen: http.IncomingHttpHeaders[] = [];
    const target = await receiver({
      handle: (req, res) => {
        seen.push(req.headers);
        if (req.url === '/moved') return res.writeHead(307, { location: `http://127.0.0.1:${elsewhere.port}/` }).end();
        if (req.url === '/empty') return res.writeHead(204).end();
        res.writeHead(429, [
          ['content-type', 'application/json'],
          ['retry-after-ms', '700'],
          ['set-cookie', 'a=1'],
          ['set-cookie', 'b=2'],
        ]);
        res.end('{"error":{"message":"slow down"}}');
      },
    });
    after(() => target.close());
    const policy = new EgressPolicy({ allowPrivate: true });
    after(() => policy.close());
    const res = await policy.fetchWhole(`http://127.0.0.1:${target.port}/v1/chat?x=1`, {
      method: 'POST',
      headers: new Headers({ 'content-type': 'application/json', authorization: 'Bearer sk-test' }),
      body: '{"model":"m"}',
    });
    assert.ok(res instanceof Response);
    assert.deepEqual(
      [res.status, res.ok, res.headers.get('retry-after-ms'), res.headers.getSetCookie()],
      [429, false, '700', ['a=1', 'b=2']],
    );
    assert.deepEqual(await res.json(), { error: { message: 'slow down' } });
    assert.deepEqual(target.requests[0], { method: 'POST', url: '/v1/chat?x=1', body: '{"model":"m"}' });
    assert.equal(seen[0]!.authorization, 'Bearer sk-test');
    assert.equal(seen[0]!['accept-encoding'], 'identity');
    const moved = await policy.fetchWhole(`http://127.0.0.1:${target.port}/moved`, { method: 'POST', body: '{}' });
    assert.equal(moved.status, 307);
    assert.equal(elsewhere.requests.length, 0);
    const empty = await policy.fetchWhole(`http://127.0.0.1:${target.port}/empty`, { method: 'DELETE' });
    assert.deepEqual([empty.status, empty.body], [204, null]);
    assert.ok(target.connections <= 2, `three short answers took ${target.connections} connections`);
  });

  it('reads up to maxResponseBytes and no further, a body in a content coding included: past it, EgressResponseTooLargeError and the connection drops', async () => {
    const plain = 'x'.repeat(100_000);
    const target = await receiver({
      handle: (req, res) => {
        if (req.url === '/long') return res.end(plain);
        const coded = zlib.gzipSync(req.url === '/bomb' ? Buffer.alloc(10_000_000) : Buffer.from('{"ok":true}'));
        res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': coded.length }).end(coded);
      },
    });
    after(() => target.close());
    const policy = new EgressPolicy({ allowPrivate: true });
    after(() => policy.close());
    const url = (path: string) => `http://127.0.0.1:${target.port}${path}`;
    const coded = await policy.fetchWhole(url('/coded'), { maxResponseBytes: 1_000 });
    assert.deepEqual([await coded.json(), coded.headers.get('content-encoding')], [{ ok: true }, null]);
    const closing = target.nextClose();
    const long = await rejection(policy.fetchWhole(url('/long'), { maxResponseBytes: 1_000 }));
    assert.ok(long instanceof EgressResponseTooLargeError, String(long));
    await closing;
    const bomb = await rejection(policy.fetchWhole(url('/bomb'), { maxResponseBytes: 100_000 }));
    assert.ok(bomb instanceof EgressResponseTooLargeError, String(bomb));
    assert.equal((await policy.fetchWhole(url('/long'))).headers.get('content-length'), '100000');
  });

  it('gives up after the total timeout with EgressTimeoutError, before the answer and while reading its body; the caller’s abort stays the caller’s', async () => {
    const { silent, stalls, policy } = await stallingReceivers();
    const before = await rejection(policy.fetchWhole(`http://127.0.0.1:${silent.port}/`, { timeoutMs: 200 }));
    assert.ok(before instanceof EgressTimeoutError, String(before));
    const during = await rejection(policy.fetchWhole(`http://127.0.0.1:${stalls.port}/`, { timeoutMs: 300 }));
    assert.ok(during instanceof EgressTimeoutError, String(during));
    assert.match(during.message, /no complete response from http:\/\/127\.0\.0\.1:\d+ within 300 ms/);
    const caller = new AbortController();
    const pending = rejection(policy.fetchWhole(`http://127.0.0.1:${stalls.port}/`, { signal: caller.signal }));
    setTimeout(() => caller.abort(new Error('the run was cancelled')), 50);
    const aborted = await pending;
    assert.ok(!(aborted instanceof EgressError), String(aborted));
    assert.equal((aborted as Error).message, 'the run was cancelled');
  });
});

/** A forward proxy on loopback that opens CONNECT tunnels and records each target, as Squid would. */
async function connectProxy() {
  const targets: string[] = [];
  const server = net.createServer((client) => {
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      const target = /^CONNECT (\S+) HTTP\/1\.1/.exec(head)?.[1] ?? '';
      targets.push(target);
      const { hostname, port } = new URL(`tcp://${target}`);
      const upstream = net.connect(Number(port), hostname.replace(/^\[|\]$/g, ''), () => {
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        upstream.pipe(client).pipe(upstream);
      });
      upstream.on('error', () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'));
    };
    client.on('data', onData);
    client.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    targets,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('through a forward proxy (HTTPS_PROXY, NO_PROXY)', () => {
  it('tunnels to the address the policy checked, not the name; refuses a name that resolves inside before any tunnel; connects directly to NO_PROXY hosts', async () => {
    const proxy = await connectProxy();
    const target = await receiver({ tls: true });
    const policy = EgressPolicy.fromEnv(
      {
        HTTPS_PROXY: proxy.url,
        no_proxy: '127.0.0.1,.internal.example',
        EGRESS_ALLOWED_CIDRS: '127.0.0.1/32',
      },
      {
        resolve: resolver({
          'receiver.test': [v4('127.0.0.1')],
          'intranet.test': [v4('10.0.0.1')],
        }),
        extraCaCertificates: [TEST_CERTIFICATE],
      },
    );
    try {
      const res = await policy.fetch(`https://receiver.test:${target.port}/hook`, { method: 'POST', body: 'x' });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'ok');
      assert.deepEqual(proxy.targets, [`127.0.0.1:${target.port}`], 'the tunnel goes to the checked address');
      assert.deepEqual(target.requests, [{ method: 'POST', url: '/hook', body: 'x' }]);

      const err = await rejection(policy.fetch(`https://intranet.test:${target.port}/`));
      assert.ok(err instanceof EgressRefusedError, String(err));
      assert.match(err.message, /resolves to a private address/);
      assert.equal(proxy.targets.length, 1, 'no tunnel was asked for a refused destination');

      const direct = await policy.fetch(`https://127.0.0.1:${target.port}/`);
      assert.equal(direct.status, 200);
      assert.equal(proxy.targets.length, 1, 'a NO_PROXY host is reached directly');
    } finally {
      await policy.close();
      await target.close();
      await proxy.close();
    }
  });

  it('says the proxy refused when it answers CONNECT with an error', async () => {
    const refusing = net.createServer((c) => c.once('data', () => c.end('HTTP/1.1 403 Forbidden\r\n\r\n')));
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const policy = EgressPolicy.fromEnv(
      { HTTPS_PROXY: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`, EGRESS_ALLOW_PRIVATE: 'true' },
      { resolve: resolver({ 'receiver.test': [v4('127.0.0.1')] }) },
    );
    try {
      const err = await rejection(policy.fetch('https://receiver.test/'));
      assert.ok(err instanceof EgressConnectionError, String(err));
      assert.match(err.message, /could not reach https:\/\/receiver\.test: .*proxy.*refused the tunnel \(HTTP 403\)/);
    } finally {
      await policy.close();
      await new Promise((r) => refusing.close(r));
    }
  });
});
