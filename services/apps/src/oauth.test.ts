/**
 * Apps behind OAuth (docs/apps.md "OAuth") over real gRPC, against real OAuth-protected MCP servers
 * in processes of their own (testing/oauth-mcp-server-main.ts: the MCP SDK's authorization server
 * and bearer auth), over https on names the egress policy resolves, as remote servers are reached.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { EgressPolicy, type EgressPolicyOptions } from '@workauto/egress';
import { TEST_CERTIFICATE } from '@workauto/egress/testing';
import type { UnaryMethod } from '@workauto/grpc';
import { setLogTarget } from '@workauto/logger';
import { AppStatus, AuthType, type App } from '@workauto/protos/workauto/apps/v1/apps.js';
import { captureLogs, eventually, ManualClock } from '@workauto/testing';
import { consent, OAuthMcpServer } from './testing/oauth-mcp-server.js';
import { failure, S, startApps, tenant, type Apps } from './test-support.js';

// Logged at trace level (to look for tokens in every line), kept off the runner's output.
if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_c, _e, done) => done() }));

const RETURN_TO = 'https://app.workauto.test/settings/apps';
const REDIRECTS = { redirectBaseUrl: 'https://api.workauto.test', allowedReturnOrigins: ['https://app.workauto.test'] };
const CALLBACK = 'https://api.workauto.test/api/v1/apps/oauth/callback';
const TENANT_SECRET = 'tenant-client-secret-7c1e';

/**
 * Remote servers as production reaches them: https only, public addresses only (loopback allowed
 * for the test servers on `receiver.test`), and `intranet.test` resolving to a private address.
 */
const egressOptions: EgressPolicyOptions = {
  allowedCidrs: ['127.0.0.0/8'],
  extraCaCertificates: [TEST_CERTIFICATE],
  resolve: (host) => {
    if (host === 'receiver.test') return Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
    if (host === 'intranet.test') return Promise.resolve([{ address: '10.0.0.7', family: 4 }]);
    return Promise.reject(Object.assign(new Error(`${host} is unknown`), { code: 'ENOTFOUND' }));
  },
};

/**
 * Longer than any advance of the test's clock: a scheduled probe running beside a test's own call
 * would meet the 401 or spend the refresh that call is asserted to (probes are tested in schedule.test.ts).
 */
const NO_SCHEDULED_PROBES_MS = 7 * 24 * 3_600_000;

describe('apps behind OAuth', () => {
  let apps: Apps;
  let replica: Apps;
  let server: OAuthMcpServer;
  const clock = new ManualClock();
  const logs = captureLogs();
  /** The user's browser: it trusts the test servers and follows no redirect. */
  const browser = new EgressPolicy(egressOptions);
  const t = tenant();
  /** Every answer the service gave, as text: no token may be in one. */
  const answers: string[] = [];
  const call = async <Req, Res>(method: UnaryMethod<Req, Res>, req: Req, on: Apps = apps): Promise<Res> => {
    const res = await on.client.call(method, req, t.call);
    answers.push(JSON.stringify(res));
    return res;
  };
  const get = (slug: string) => call(S.getApp, { slug });
  const callTool = (slug: string, name: string, args: Record<string, unknown>, on: Apps = apps) =>
    call(S.callTool, { slug, name, arguments: args }, on);

  /** An admin's authorize, the user's consent, and the callback; returns where the browser lands. */
  const connect = async (slug: string): Promise<URL> => {
    const started = await call(S.authorizeAppOAuth, {
      slug,
      return_to: RETURN_TO,
    });
    const back = await consent(started.authorization_url, (url) => browser.fetch(url));
    const param = (name: string) => back.searchParams.get(name) ?? undefined;
    const done = await apps.client.call(S.completeAppOAuth, {
      code: param('code'),
      state: param('state'),
      error: param('error'),
    });
    answers.push(JSON.stringify(done));
    return new URL(done.location);
  };
  const healthy = async (slug: string) => {
    let app: App | undefined;
    await eventually(
      `app ${slug} probed healthy`,
      async () => (app = await get(slug)).status === AppStatus.APP_STATUS_HEALTHY,
    );
    return app!;
  };
  const outbox = async () =>
    (
      await apps.db.query<{ event_type: string }>('SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq', [
        t.id,
      ])
    ).rows.map((r) => r.event_type);

  before(async () => {
    [server, apps] = await Promise.all([
      OAuthMcpServer.start({ tls: true, host: 'receiver.test' }),
      startApps({
        logLevel: 'trace',
        egress: egressOptions,
        clock,
        oauth: REDIRECTS,
        toolCallTimeoutMs: 5_000,
        probeTimeoutMs: 5_000,
        probeIntervalMs: NO_SCHEDULED_PROBES_MS,
      }),
    ]);
    // Another replica on the same database: refreshes are coordinated there, not in memory.
    replica = await startApps({
      databaseUrl: apps.databaseUrl,
      encryptionKeys: apps.encryptionKeys,
      logLevel: 'trace',
      egress: egressOptions,
      clock,
      oauth: REDIRECTS,
      toolCallTimeoutMs: 5_000,
      probeIntervalMs: NO_SCHEDULED_PROBES_MS,
    });
  });

  after(async () => {
    logs.stop();
    const issued = (await server.stats()).issued;
    // No token, code or client secret in any answer, log line, or table but the encrypted columns.
    const tables = (
      await apps.db.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
      )
    ).rows.map((r) => r.table_name);
    let stored = '';
    for (const table of tables) {
      const { rows } = await apps.db.query(`SELECT * FROM "${table}"`);
      stored += JSON.stringify(rows, (_k, v: unknown) =>
        v && typeof v === 'object' && (v as { type?: string }).type === 'Buffer'
          ? Buffer.from((v as { data: number[] }).data).toString('latin1')
          : v,
      );
    }
    await Promise.all([apps.stop(), replica.stop(), server.stop(), browser.close()]);
    assert.match(logs.text(), /AuthorizeAppOAuth/, "the capture saw the service's lines");
    assert.ok(issued.length >= 10, 'the servers handed out tokens');
    for (const secret of [...issued, TENANT_SECRET]) {
      assert.equal(logs.text().includes(secret), false, `a log line holds ${secret}`);
      assert.equal(answers.join('\n').includes(secret), false, `an answer holds ${secret}`);
      assert.equal(stored.includes(secret), false, `a table holds ${secret} in the clear`);
    }
  });

  it('connects: discovery from the 401, a registered client, PKCE S256 and the resource; then lists and calls tools', async () => {
    const created = await call(S.createApp, {
      slug: 'tracker',
      display_name: 'Tracker',
      mcp_server_url: server.mcpUrl,
      auth: { type: AuthType.AUTH_TYPE_OAUTH2 },
    });
    assert.equal(created.status, AppStatus.APP_STATUS_NEEDS_AUTHORIZATION);
    assert.match(created.status_reason!, /POST \/api\/v1\/apps\/tracker\/oauth\/authorize/);
    const probed = await call(S.probeApp, { slug: 'tracker' });
    assert.equal(probed.status, AppStatus.APP_STATUS_NEEDS_AUTHORIZATION, 'nothing to probe with');

    const started = await call(S.authorizeAppOAuth, {
      slug: 'tracker',
      return_to: RETURN_TO,
    });
    const url = new URL(started.authorization_url);
    assert.equal(url.origin + '/', server.issuer, 'the authorization endpoint the metadata names');
    const q = Object.fromEntries(url.searchParams);
    assert.deepEqual(
      [q.response_type, q.code_challenge_method, q.redirect_uri, q.resource],
      ['code', 'S256', CALLBACK, server.mcpUrl],
    );
    assert.ok(q.code_challenge && q.state && q.client_id);
    assert.equal(started.expires_at?.getTime(), clock.now().getTime() + 10 * 60_000);
    let stats = await server.stats();
    assert.equal(stats.registrations, 1, 'Dynamic Client Registration');
    assert.deepEqual(
      stats.mcpRequests.map((r) => [r.status, r.token]),
      [[401, undefined]],
      'the challenge, without a token',
    );
    const pending = await get('tracker');
    assert.deepEqual(
      [pending.status, pending.oauth?.client_id, pending.oauth?.dynamic_client, pending.oauth?.authorization_server],
      [AppStatus.APP_STATUS_NEEDS_AUTHORIZATION, q.client_id, true, server.issuer],
    );

    const back = await consent(started.authorization_url, (u) => browser.fetch(u));
    assert.equal(back.origin + back.pathname, CALLBACK);
    const done = await apps.client.call(S.completeAppOAuth, {
      code: back.searchParams.get('code')!,
      state: back.searchParams.get('state')!,
    });
    assert.equal(done.location, `${RETURN_TO}?status=connected&app=tracker`);
    stats = await server.stats();
    assert.deepEqual(stats.tokenRequests, [
      { grantType: 'authorization_code', clientId: q.client_id, resource: server.mcpUrl },
    ]);
    const app = await healthy('tracker');
    assert.deepEqual(
      app.discovered_tools.map((x) => x.name),
      ['echo', 'whoami'],
    );
    assert.ok(app.oauth?.connected_at && app.oauth.access_token_expires_at);
    await call(S.updateApp, { slug: 'tracker', enabled_tools: ['echo', 'whoami'] });
    const echoed = await callTool('tracker', 'echo', { text: 'hello' });
    assert.deepEqual([echoed.is_error, echoed.content[0]?.text], [false, 'hello']);
    // A server that shows the caller its own token: the caller never sees it.
    const whoami = await callTool('tracker', 'whoami', {});
    assert.equal(whoami.content[0]?.text, 'you called with [redacted]');
    stats = await server.stats();
    const token = stats.toolCalls[0]!.token;
    assert.ok(stats.issued.includes(token), 'the tool call carried the issued access token');

    const { rows } = await apps.db.query('SELECT tokens_ciphertext FROM app_oauth WHERE app_id = $1', [app.id]);
    assert.ok(rows[0].tokens_ciphertext.startsWith('wk1.'), 'stored encrypted');
    assert.deepEqual((await outbox()).slice(0, 4), [
      'app.created',
      'app.authorization_started',
      'app.connected',
      'app.status_changed',
    ]);
    // The state was single-use.
    const replayed = await failure(
      apps.client.call(S.completeAppOAuth, {
        code: back.searchParams.get('code')!,
        state: back.searchParams.get('state')!,
      }),
    );
    assert.deepEqual([replayed.code, replayed.fieldViolations[0]?.field], [grpc.status.INVALID_ARGUMENT, 'state']);
  });

  it('refreshes the access token before it expires (on the clock) and after a 401, without the caller noticing', async () => {
    const refreshes = async () => (await server.stats()).tokenRequests.filter((r) => r.grantType === 'refresh_token');
    // The token has an hour: 59.5 minutes later it is within the minute it is refreshed in.
    await clock.advance(3_570_000);
    assert.equal((await callTool('tracker', 'echo', { text: 'later' })).content[0]?.text, 'later');
    assert.equal((await refreshes()).length, 1, 'refreshed once, before the call');
    // The server drops every access token it gave (as a server that expires them early does).
    await server.control({ expireAccessTokens: true });
    assert.equal((await callTool('tracker', 'echo', { text: 'again' })).content[0]?.text, 'again');
    const stats = await server.stats();
    assert.deepEqual(
      stats.mcpRequests.slice(-4).map((r) => r.status),
      [401, 200, 202, 200],
      'the 401, then the call sent again with the new token (initialize, initialized, tools/call)',
    );
    assert.equal((await refreshes()).length, 2);
    assert.ok(
      (await refreshes()).every((r) => r.resource === server.mcpUrl),
      'refreshes carry the resource',
    );
  });

  it('spends a refresh token once when two replicas refresh at once', async () => {
    const before = (await server.stats()).tokenRequests.length;
    // The server drops the access token and answers the refresh slowly, so both replicas meet there.
    await server.control({ expireAccessTokens: true, refreshDelayMs: 400 });
    const [a, b] = await Promise.all([
      callTool('tracker', 'echo', { text: 'one' }),
      callTool('tracker', 'echo', { text: 'two' }, replica),
    ]);
    await server.control({ refreshDelayMs: 0 });
    assert.deepEqual([a.content[0]?.text, b.content[0]?.text], ['one', 'two']);
    const stats = await server.stats();
    assert.equal(stats.tokenRequests.length - before, 1, 'one refresh for both');
    assert.ok(stats.mcpRequests.filter((r) => r.status === 401).length >= 3, 'both replicas met the 401');
    assert.equal((await get('tracker')).status, AppStatus.APP_STATUS_HEALTHY);
  });

  it('a refresh the server refuses: needs_authorization, app.authorization_required, calls 409 until connected again', async () => {
    await server.control({ expireAccessTokens: true, revokeRefreshTokens: true });
    const refused = await failure(callTool('tracker', 'echo', { text: 'x' }));
    assert.deepEqual([refused.code, refused.reason], [grpc.status.FAILED_PRECONDITION, 'APP_NEEDS_AUTHORIZATION']);
    assert.match(refused.message, /invalid_grant/);
    assert.match(refused.message, /POST \/api\/v1\/apps\/tracker\/oauth\/authorize/);
    const app = await get('tracker');
    assert.equal(app.status, AppStatus.APP_STATUS_NEEDS_AUTHORIZATION);
    assert.equal(app.oauth?.connected_at, undefined);
    assert.equal((await outbox()).filter((e) => e === 'app.authorization_required').length, 1);
    // No request reaches the server until an admin connects it again; agents are not offered its tools.
    const sent = (await server.stats()).mcpRequests.length;
    assert.equal((await failure(callTool('tracker', 'echo', { text: 'y' }))).reason, 'APP_NEEDS_AUTHORIZATION');
    assert.equal((await server.stats()).mcpRequests.length, sent);
    assert.deepEqual((await call(S.listAgentTools, {})).tools, []);

    assert.equal((await connect('tracker')).searchParams.get('status'), 'connected');
    assert.equal((await server.stats()).registrations, 1, 'the registered client is used again');
    await healthy('tracker');
    assert.equal((await callTool('tracker', 'echo', { text: 'back' })).content[0]?.text, 'back');
  });

  it('DELETE /apps/{slug}/oauth revokes the tokens (RFC 7009) and forgets them', async () => {
    const app = await call(S.disconnectAppOAuth, { slug: 'tracker' });
    assert.equal(app.status, AppStatus.APP_STATUS_NEEDS_AUTHORIZATION);
    assert.match(app.status_reason!, /^disconnected: the authorization server revoked the tokens/);
    const stats = await server.stats();
    assert.deepEqual(
      stats.revocations.map((r) => [r.hint, r.known]),
      [
        ['refresh_token', true],
        ['access_token', true],
      ],
    );
    const { rows } = await apps.db.query('SELECT tokens_ciphertext FROM app_oauth WHERE app_id = $1', [app.id]);
    assert.equal(rows[0].tokens_ciphertext, null);
    assert.equal((await outbox()).at(-1), 'app.disconnected');
    assert.equal((await failure(callTool('tracker', 'echo', { text: 'z' }))).reason, 'APP_NEEDS_AUTHORIZATION');
  });

  it('a state is single-use and expires after 10 minutes (on the clock); a refused consent comes back as an error', async () => {
    const started = await call(S.authorizeAppOAuth, {
      slug: 'tracker',
      return_to: RETURN_TO,
    });
    const back = await consent(started.authorization_url, (u) => browser.fetch(u));
    await clock.advance(10 * 60_000 + 1_000);
    const expired = await failure(
      apps.client.call(S.completeAppOAuth, {
        code: back.searchParams.get('code')!,
        state: back.searchParams.get('state')!,
      }),
    );
    assert.deepEqual([expired.code, expired.fieldViolations[0]?.field], [grpc.status.INVALID_ARGUMENT, 'state']);
    assert.match(expired.fieldViolations[0]!.description, /unknown, expired or already used/);
    const unknown = await failure(apps.client.call(S.completeAppOAuth, { code: 'c', state: 'not-a-state' }));
    assert.equal(unknown.code, grpc.status.INVALID_ARGUMENT);

    await server.control({ deny: true });
    const denied = await connect('tracker').finally(() => server.control({ deny: false }));
    assert.equal(denied.href, `${RETURN_TO}?status=error&reason=access_denied&app=tracker`);
    assert.equal((await get('tracker')).status, AppStatus.APP_STATUS_NEEDS_AUTHORIZATION);
  });

  it('refuses what cannot be connected: a return_to elsewhere, a static app, metadata at a private address', async () => {
    const bad = (return_to: string) => failure(call(S.authorizeAppOAuth, { slug: 'tracker', return_to }));
    for (const return_to of ['https://evil.example.net/x', `${RETURN_TO}\r\nLocation: https://evil.example.net`]) {
      const r = await bad(return_to);
      assert.deepEqual([r.code, r.fieldViolations[0]?.field], [grpc.status.INVALID_ARGUMENT, 'return_to']);
    }
    await call(S.createApp, {
      slug: 'static',
      display_name: 'Static',
      mcp_server_url: server.mcpUrl,
      auth: { type: AuthType.AUTH_TYPE_BEARER, secret: 'static-secret-1' },
    });
    const notOAuth = await failure(call(S.authorizeAppOAuth, { slug: 'static', return_to: RETURN_TO }));
    assert.deepEqual([notOAuth.code, notOAuth.reason], [grpc.status.FAILED_PRECONDITION, 'APP_NOT_OAUTH']);

    const sly = await OAuthMcpServer.start({
      tls: true,
      host: 'receiver.test',
      resourceMetadataUrl: 'https://intranet.test/.well-known/oauth-protected-resource/mcp',
    });
    try {
      await call(S.createApp, {
        slug: 'sly',
        display_name: 'Sly',
        mcp_server_url: sly.mcpUrl,
        auth: { type: AuthType.AUTH_TYPE_OAUTH2 },
      });
      const refused = await failure(call(S.authorizeAppOAuth, { slug: 'sly', return_to: RETURN_TO }));
      assert.deepEqual([refused.code, refused.reason], [grpc.status.FAILED_PRECONDITION, 'APP_OAUTH_UNSUPPORTED']);
      assert.match(refused.message, /intranet\.test resolves to a private address/);
      assert.equal(refused.message.includes('10.0.0.7'), false, 'the rule, never the address');
      assert.equal((await sly.stats()).registrations, 0);
    } finally {
      await sly.stop();
    }
  });

  it("connects with the tenant's own client where the server offers no registration, and forgets tokens it cannot revoke", async () => {
    const own = await OAuthMcpServer.start({
      tls: true,
      host: 'receiver.test',
      registration: false,
      revocation: false,
      clients: [{ client_id: 'tenant-client', client_secret: TENANT_SECRET, redirect_uris: [CALLBACK] }],
    });
    try {
      await call(S.createApp, {
        slug: 'own',
        display_name: 'Own',
        mcp_server_url: own.mcpUrl,
        auth: { type: AuthType.AUTH_TYPE_OAUTH2 },
      });
      const noClient = await failure(call(S.authorizeAppOAuth, { slug: 'own', return_to: RETURN_TO }));
      assert.deepEqual(
        [noClient.code, noClient.reason],
        [grpc.status.FAILED_PRECONDITION, 'APP_OAUTH_CLIENT_REQUIRED'],
      );
      assert.ok(noClient.message.includes(CALLBACK), 'it names the redirect URI to register');
      const rotated = await call(S.rotateAppAuth, {
        slug: 'own',
        auth: { type: AuthType.AUTH_TYPE_OAUTH2, client_id: 'tenant-client', client_secret: TENANT_SECRET },
      });
      assert.deepEqual(
        [rotated.auth_hint, rotated.oauth?.client_id, rotated.oauth?.dynamic_client],
        [TENANT_SECRET.slice(-4), 'tenant-client', false],
      );
      assert.equal((await connect('own')).searchParams.get('status'), 'connected');
      assert.deepEqual(
        (await own.stats()).tokenRequests.map((r) => [r.grantType, r.clientId]),
        [['authorization_code', 'tenant-client']],
      );
      await healthy('own');
      const app = await call(S.disconnectAppOAuth, { slug: 'own' });
      assert.match(app.status_reason!, /advertises no revocation endpoint/);
      assert.deepEqual((await own.stats()).revocations, []);
    } finally {
      await own.stop();
    }
  });
});
