import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { AppStatus, AuthType, type App, type CreateAppRequest } from '@workauto/protos/workauto/apps/v1/apps.js';
import { decodeEvent } from '@workauto/events';
import { setLogTarget } from '@workauto/logger';
import { captureLogs, eventually, withAccess } from '@workauto/testing';
import { S, badFields, failure, startApps, tenant, type Apps } from './test-support.js';
import { pruneTools } from './repo/apps.js';
import {
  downUrl,
  startHighLevelMcpServer,
  startMcpServer,
  startPlainServer,
  type McpTestServer,
} from './testing/mcp-servers.js';

// Logged at trace level (to look for secrets in every line), kept off the runner's output.
if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_c, _e, done) => done() }));

const BEARER = 'bearer-secret-4f9a1c77';
const HEADER_SECRET = 'header-secret-8d2e5b11';
const tools = (...names: string[]) =>
  names.map((name) => ({ name, description: `does ${name}`, inputSchema: { properties: { q: { type: 'string' } } } }));

describe('apps over gRPC', () => {
  let apps: Apps;
  const logs = captureLogs();
  const servers: { close(): Promise<void> }[] = [];
  const secrets = [BEARER, HEADER_SECRET];
  const keep = <T extends { close(): Promise<void> }>(s: T) => (servers.push(s), s);

  before(async () => {
    // The default 10 s probe timeout: the 64-page listing below fits in it beside a second `make test`.
    apps = await startApps({ logLevel: 'trace' });
  });
  after(async () => {
    logs.stop();
    await apps.stop();
    await Promise.all(servers.map((s) => s.close()));
    // The secrets never reached a log line, at any level.
    assert.match(logs.text(), /CreateApp/, "the capture saw the service's lines");
    for (const secret of secrets)
      assert.equal(logs.text().includes(secret), false, `a log line holds the secret ${secret}`);
  });

  const create = (
    t: ReturnType<typeof tenant>,
    body: Partial<CreateAppRequest> & { slug: string; mcp_server_url: string },
  ) => apps.client.call(S.createApp, { display_name: 'An app', ...body }, t.call);
  const get = (t: ReturnType<typeof tenant>, slug: string) => apps.client.call(S.getApp, { slug }, t.call);
  const probe = (t: ReturnType<typeof tenant>, slug: string) => apps.client.call(S.probeApp, { slug }, t.call);
  /** The app once its first (background) probe has run. */
  const settled = async (t: ReturnType<typeof tenant>, slug: string) => {
    let app: App | undefined;
    await eventually(
      `app ${slug} probed`,
      async () => (app = await get(t, slug)).status !== AppStatus.APP_STATUS_PENDING,
    );
    return app!;
  };

  it('creates an app pending, probes it at once in the background, and never returns the secret', async () => {
    const t = tenant();
    const server = keep(
      await startMcpServer({
        transport: 'streamable',
        auth: { header: 'authorization', value: `Bearer ${BEARER}` },
        tools: tools('search', 'fetch'),
      }),
    );
    const created = await create(t, {
      slug: 'docs',
      mcp_server_url: server.url,
      description: 'Docs',
      metadata: { team: 'a' },
      auth: { type: AuthType.AUTH_TYPE_BEARER, secret: BEARER },
    });
    assert.deepEqual(
      [
        created.status,
        created.discovered_tools,
        created.enabled_tools,
        created.auth_type,
        created.auth_hint,
        created.tenant_id,
        created.consecutive_probe_failures,
        created.metadata,
      ],
      [AppStatus.APP_STATUS_PENDING, [], [], AuthType.AUTH_TYPE_BEARER, BEARER.slice(-4), t.id, 0, { team: 'a' }],
    );
    assert.equal(JSON.stringify(created).includes(BEARER), false);
    const app = await settled(t, 'docs');
    assert.equal(app.status, AppStatus.APP_STATUS_HEALTHY, app.status_reason);
    assert.deepEqual(
      app.discovered_tools.map((x) => [x.name, x.description, x.stale, x.input_schema]),
      [
        ['fetch', 'does fetch', false, { type: 'object', properties: { q: { type: 'string' } } }],
        ['search', 'does search', false, { type: 'object', properties: { q: { type: 'string' } } }],
      ],
    );
    assert.ok(app.last_healthy_at && app.last_probed_at && app.status_reason === undefined);
    assert.ok(
      server.requests.every((r) => r.headers.authorization === `Bearer ${BEARER}`),
      'every request carried the stored credential',
    );
    assert.deepEqual(await apps.events(t.id), ['app.created', 'app.status_changed']);
    assert.equal((await apps.outboxText(t.id)).includes(BEARER), false, 'no event holds the secret');
    const { rows } = await apps.db.query('SELECT auth_ciphertext FROM apps WHERE id = $1', [app.id]);
    assert.ok(
      rows[0].auth_ciphertext.startsWith('wk1.') && !rows[0].auth_ciphertext.includes(BEARER),
      'stored encrypted',
    );
  });

  it('validates the body: slug, URL, auth; a taken slug is 409', async () => {
    const t = tenant();
    const url = 'http://127.0.0.1:9/mcp';
    assert.deepEqual(await badFields(create(t, { slug: 'A', mcp_server_url: url })), ['slug']);
    assert.deepEqual(await badFields(create(t, { slug: 'ok-slug', mcp_server_url: 'ftp://x/y' })), ['mcp_server_url']);
    assert.deepEqual(
      await badFields(create(t, { slug: 'ok-slug', mcp_server_url: url, auth: { type: AuthType.AUTH_TYPE_BEARER } })),
      ['auth.secret'],
    );
    assert.deepEqual(
      await badFields(
        create(t, {
          slug: 'ok-slug',
          mcp_server_url: url,
          auth: { type: AuthType.AUTH_TYPE_HEADER, secret: HEADER_SECRET },
        }),
      ),
      ['auth.header_name'],
    );
    assert.deepEqual(
      await badFields(
        create(t, {
          slug: 'ok-slug',
          mcp_server_url: url,
          auth: { type: AuthType.AUTH_TYPE_HEADER, secret: HEADER_SECRET, header_name: 'Content-Type' },
        }),
      ),
      ['auth.header_name'],
    );
    assert.deepEqual(
      await badFields(
        create(t, {
          slug: 'ok-slug',
          mcp_server_url: url,
          auth: { type: AuthType.AUTH_TYPE_NONE, secret: HEADER_SECRET },
        }),
      ),
      ['auth.secret'],
    );
    assert.deepEqual(
      await badFields(
        create(t, {
          slug: 'ok-slug',
          mcp_server_url: url,
          auth: { type: AuthType.AUTH_TYPE_BEARER, secret: 'a\r\nb-secret' },
        }),
      ),
      ['auth.secret'],
    );
    await create(t, { slug: 'taken', mcp_server_url: url });
    const dup = await failure(create(t, { slug: 'taken', mcp_server_url: url }));
    assert.deepEqual([dup.code, dup.reason], [grpc.status.ALREADY_EXISTS, 'APP_SLUG_TAKEN']);
  });

  it('drops the result of a probe whose URL changed while it ran', async () => {
    const t = tenant();
    const hanging = keep(await startPlainServer('hang'));
    const good = keep(await startMcpServer({ transport: 'streamable', tools: tools('a') }));
    const created = await create(t, { slug: 'moved', mcp_server_url: hanging.url });
    await eventually('the first probe is under way', () => hanging.hits > 0);
    await apps.client.call(S.updateApp, { slug: 'moved', mcp_server_url: good.url, enabled_tools: [] }, t.call);
    await eventually(
      "the hanging probe's result was dropped",
      () => logs.lines.some((l) => l.includes('probe result dropped') && l.includes(created.id)),
      15_000,
    );
    const app = await settled(t, 'moved');
    assert.deepEqual(
      [app.status, app.consecutive_probe_failures],
      [AppStatus.APP_STATUS_HEALTHY, 0],
      app.status_reason,
    );
    const { rows } = await apps.db.query(
      "SELECT count(*)::int AS n FROM outbox WHERE tenant_id = $1 AND event_type = 'app.status_changed'",
      [t.id],
    );
    assert.equal(rows[0].n, 1, 'only pending → healthy');
  });

  it('gives one of 20 parallel creates of a slug the slug, and 409 to the others', async () => {
    const t = tenant();
    const url = await downUrl();
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () => create(t, { slug: 'race', mcp_server_url: url })),
    );
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
    for (const r of results)
      if (r.status === 'rejected') assert.equal((r.reason as grpc.ServiceError).code, grpc.status.ALREADY_EXISTS);
  });

  it('shows mcp_server_url reduced to scheme, host and port to callers below admin on apps', async () => {
    const t = tenant();
    const url = `${(await downUrl()).replace('/mcp', '')}/v1/sk_live_abc/mcp?token=x`;
    const origin = new URL(url).origin;
    const created = await create(t, { slug: 'tokened', mcp_server_url: url });
    assert.equal(created.mcp_server_url, url, 'the admin who wrote it sees it');
    const reader = withAccess(t.call, { apps: 'write', webhooks: 'admin' });
    assert.equal((await apps.client.call(S.getApp, { slug: 'tokened' }, reader)).mcp_server_url, `${origin}/…`);
    assert.deepEqual(
      (await apps.client.call(S.listApps, {}, reader)).data.map((x) => x.mcp_server_url),
      [`${origin}/…`],
    );
    const admin = withAccess(t.call, { apps: 'admin' });
    assert.equal((await apps.client.call(S.getApp, { slug: 'tokened' }, admin)).mcp_server_url, url);
    assert.equal((await get(t, 'tokened')).mcp_server_url, url, 'a caller without levels sees it whole');
  });

  it("keeps tenants apart: another tenant's app is a 404 and never listed", async () => {
    const a = tenant();
    const b = tenant();
    const url = await downUrl();
    await create(a, { slug: 'mine', mcp_server_url: url });
    await create(b, { slug: 'mine', mcp_server_url: url }); // the same slug in another tenant is fine
    await create(b, { slug: 'theirs', mcp_server_url: url });
    for (const call of [
      () => get(a, 'theirs'),
      () => probe(a, 'theirs'),
      () => apps.client.call(S.deleteApp, { slug: 'theirs' }, a.call),
      () => apps.client.call(S.updateApp, { slug: 'theirs', display_name: 'x', enabled_tools: [] }, a.call),
      () =>
        apps.client.call(
          S.rotateAppAuth,
          { slug: 'theirs', auth: { type: AuthType.AUTH_TYPE_BEARER, secret: BEARER } },
          a.call,
        ),
      () => apps.client.call(S.callTool, { slug: 'theirs', name: 'x' }, a.call),
    ]) {
      const err = await failure(call());
      assert.deepEqual([err.code, err.reason], [grpc.status.NOT_FOUND, 'APP_NOT_FOUND']);
    }
    const listed = await apps.client.call(S.listApps, {}, a.call);
    assert.deepEqual(
      listed.data.map((x) => x.slug),
      ['mine'],
    );
    assert.equal((await get(b, 'theirs')).slug, 'theirs', 'still there');
  });

  it('lists newest first with a cursor; patches, and deletes', async () => {
    const t = tenant();
    const url = await downUrl();
    for (const slug of ['one', 'two', 'three']) await create(t, { slug, mcp_server_url: url });
    const first = await apps.client.call(S.listApps, { limit: 2 }, t.call);
    assert.deepEqual([first.data.map((x) => x.slug), first.has_more], [['three', 'two'], true]);
    const rest = await apps.client.call(S.listApps, { limit: 2, cursor: first.next_cursor! }, t.call);
    assert.deepEqual([rest.data.map((x) => x.slug), rest.has_more], [['one'], false]);
    const patched = await apps.client.call(
      S.updateApp,
      { slug: 'one', display_name: 'One', description: 'd', metadata: { v: 2 }, enabled_tools: [] },
      t.call,
    );
    assert.deepEqual([patched.display_name, patched.description, patched.metadata], ['One', 'd', { v: 2 }]);
    const cleared = await apps.client.call(
      S.updateApp,
      { slug: 'one', description: '', enabled_tools: [], update_mask: ['description'] },
      t.call,
    );
    assert.equal(cleared.description, undefined);
    await apps.client.call(S.deleteApp, { slug: 'one' }, t.call);
    assert.equal((await failure(get(t, 'one'))).code, grpc.status.NOT_FOUND);
    const events = await apps.events(t.id);
    assert.deepEqual(
      events.filter((e) => e !== 'app.status_changed'),
      ['app.created', 'app.created', 'app.created', 'app.updated', 'app.updated', 'app.deleted'],
    );
  });

  it('tells the statuses apart: auth_failed, unreachable (down, hanging, 5xx), protocol_error; counts and resets failures', async () => {
    const t = tenant();
    const server = keep(
      await startMcpServer({
        transport: 'streamable',
        auth: { header: 'authorization', value: `Bearer ${BEARER}` },
        tools: tools('a'),
      }),
    );
    await create(t, {
      slug: 'wrong-key',
      mcp_server_url: server.url,
      auth: { type: AuthType.AUTH_TYPE_BEARER, secret: 'not-the-right-secret' },
    });
    let app = await settled(t, 'wrong-key');
    assert.equal(app.status, AppStatus.APP_STATUS_AUTH_FAILED);
    assert.match(app.status_reason!, /401/);
    assert.deepEqual(app.discovered_tools, []);
    app = await probe(t, 'wrong-key');
    assert.equal(app.consecutive_probe_failures, 2);

    const forbidden = keep(await startPlainServer({ status: 403, contentType: 'application/json', body: '{}' }));
    await create(t, { slug: 'forbidden', mcp_server_url: forbidden.url });
    assert.equal((await settled(t, 'forbidden')).status, AppStatus.APP_STATUS_AUTH_FAILED);

    await create(t, { slug: 'down', mcp_server_url: await downUrl() });
    app = await settled(t, 'down');
    assert.equal(app.status, AppStatus.APP_STATUS_UNREACHABLE);
    assert.match(app.status_reason!, /could not reach|ECONNREFUSED/);

    const hanging = keep(await startPlainServer('hang'));
    await create(t, { slug: 'hangs', mcp_server_url: hanging.url });
    app = await probe(t, 'hangs');
    assert.ok(hanging.hits > 0, 'the server got the probe, and never answered it');
    assert.equal(app.status, AppStatus.APP_STATUS_UNREACHABLE);
    assert.match(app.status_reason!, /did not answer within 10 s/);

    const failing = keep(await startPlainServer({ status: 502, body: 'bad gateway' }));
    await create(t, { slug: 'five-oh-two', mcp_server_url: failing.url });
    app = await settled(t, 'five-oh-two');
    assert.deepEqual(
      [app.status, app.status_reason],
      [AppStatus.APP_STATUS_UNREACHABLE, 'the server answered HTTP 502'],
    );

    const html = keep(await startPlainServer({ status: 200, contentType: 'text/html' }));
    await create(t, { slug: 'html', mcp_server_url: html.url });
    app = await settled(t, 'html');
    assert.equal(app.status, AppStatus.APP_STATUS_PROTOCOL_ERROR, app.status_reason);
    const notFound = keep(await startPlainServer({ status: 404, contentType: 'text/html' }));
    await create(t, { slug: 'not-found', mcp_server_url: notFound.url });
    app = await settled(t, 'not-found');
    assert.equal(app.status, AppStatus.APP_STATUS_PROTOCOL_ERROR, app.status_reason);

    // A redirect, even to the same origin, is never followed.
    const redirecting = keep(await startPlainServer({ status: 307, headers: { location: '/elsewhere' } }));
    await create(t, { slug: 'redirects', mcp_server_url: redirecting.url });
    app = await settled(t, 'redirects');
    assert.equal(app.status, AppStatus.APP_STATUS_PROTOCOL_ERROR);
    assert.match(app.status_reason!, /redirect \(HTTP 307\), which is never followed/);
    assert.equal(redirecting.paths.includes('/elsewhere'), false, 'no request to the redirect target');

    // A good probe resets the count and clears the reason.
    await apps.client.call(
      S.rotateAppAuth,
      { slug: 'wrong-key', auth: { type: AuthType.AUTH_TYPE_BEARER, secret: BEARER } },
      t.call,
    );
    app = await probe(t, 'wrong-key');
    assert.deepEqual(
      [app.status, app.consecutive_probe_failures, app.status_reason],
      [AppStatus.APP_STATUS_HEALTHY, 0, undefined],
    );
  });

  it('falls back to SSE for a server that speaks only the older transport, with header auth', async () => {
    const t = tenant();
    const server = keep(
      await startMcpServer({
        transport: 'sse',
        auth: { header: 'x-api-key', value: HEADER_SECRET },
        tools: tools('legacy'),
      }),
    );
    await create(t, {
      slug: 'legacy',
      mcp_server_url: server.url,
      auth: { type: AuthType.AUTH_TYPE_HEADER, secret: HEADER_SECRET, header_name: 'X-Api-Key' },
    });
    const app = await settled(t, 'legacy');
    assert.equal(app.status, AppStatus.APP_STATUS_HEALTHY, app.status_reason);
    assert.deepEqual(
      app.discovered_tools.map((x) => x.name),
      ['legacy'],
    );
    assert.equal(app.auth_header_name, 'X-Api-Key');
    await apps.client.call(S.updateApp, { slug: 'legacy', enabled_tools: ['legacy'] }, t.call);
    const result = await apps.client.call(
      S.callTool,
      { slug: 'legacy', name: 'legacy', arguments: { q: 'x' } },
      t.call,
    );
    assert.deepEqual([result.is_error, result.content], [false, [{ type: 'text', text: 'legacy:{"q":"x"}' }]]);
    assert.equal(server.calls[0]!.headers['x-api-key'], HEADER_SECRET, 'the server saw the stored credential');
  });

  it('rotates the secret without a request to the server; the next probe carries the new one', async () => {
    const t = tenant();
    const NEW = 'rotated-secret-77aa01bc';
    secrets.push(NEW);
    const server = keep(
      await startMcpServer({
        transport: 'streamable',
        auth: { header: 'authorization', value: `Bearer ${NEW}` },
        tools: tools('x'),
      }),
    );
    await create(t, {
      slug: 'rot',
      mcp_server_url: server.url,
      auth: { type: AuthType.AUTH_TYPE_BEARER, secret: BEARER },
    });
    assert.equal((await settled(t, 'rot')).status, AppStatus.APP_STATUS_AUTH_FAILED);
    const before = server.requests.length;
    const state = async () =>
      (
        await apps.db.query('SELECT key_version, next_probe_at FROM apps WHERE tenant_id = $1 AND slug = $2', [
          t.id,
          'rot',
        ])
      ).rows[0];
    const v1 = await state();
    const rotated = await apps.client.call(
      S.rotateAppAuth,
      { slug: 'rot', auth: { type: AuthType.AUTH_TYPE_BEARER, secret: NEW } },
      t.call,
    );
    assert.deepEqual([rotated.auth_hint, rotated.status], [NEW.slice(-4), AppStatus.APP_STATUS_AUTH_FAILED]);
    assert.equal(server.requests.length, before, 'no request during the rotate');
    // Nor after it: the rotate made no probe due (its slot is as it was).
    const v2 = await state();
    assert.deepEqual(v2.next_probe_at, v1.next_probe_at);
    assert.equal(v2.key_version, v1.key_version + 1);
    assert.equal((await probe(t, 'rot')).status, AppStatus.APP_STATUS_HEALTHY);
    assert.equal(server.requests.at(-1)!.headers.authorization, `Bearer ${NEW}`);
    assert.deepEqual(
      await badFields(
        apps.client.call(S.rotateAppAuth, { slug: 'rot', auth: { type: AuthType.AUTH_TYPE_NONE } }, t.call),
      ),
      ['auth.type'],
    );
    assert.deepEqual((await apps.events(t.id)).slice(-2), ['app.auth_rotated', 'app.status_changed']);
    assert.equal((await apps.outboxText(t.id)).includes(NEW), false);
  });

  it('marks a removed tool stale only after a complete good listing, and brings it back when listed again', async () => {
    const t = tenant();
    const server = keep(await startMcpServer({ transport: 'streamable', tools: tools('a', 'b', 'c'), pageSize: 2 }));
    await create(t, { slug: 'changing', mcp_server_url: server.url });
    let app = await settled(t, 'changing');
    assert.deepEqual(
      app.discovered_tools.map((x) => x.name),
      ['a', 'b', 'c'],
      'two pages followed',
    );
    const firstSeen = app.discovered_tools[1]!.first_seen_at;
    server.tools = tools('a', 'c');
    // A failed probe changes no tool.
    const url = server.url;
    await apps.db.query(
      "UPDATE apps SET mcp_server_url = 'http://127.0.0.1:9/mcp' WHERE tenant_id = $1 AND slug = 'changing'",
      [t.id],
    );
    app = await probe(t, 'changing');
    assert.equal(app.status, AppStatus.APP_STATUS_UNREACHABLE);
    assert.deepEqual(
      app.discovered_tools.map((x) => x.stale),
      [false, false, false],
    );
    await apps.db.query('UPDATE apps SET mcp_server_url = $2 WHERE tenant_id = $1 AND slug = $3', [
      t.id,
      url,
      'changing',
    ]);
    app = await probe(t, 'changing');
    assert.deepEqual(
      app.discovered_tools.map((x) => [x.name, x.stale]),
      [
        ['a', false],
        ['b', true],
        ['c', false],
      ],
    );
    server.tools = tools('a', 'b', 'c', 'd');
    app = await probe(t, 'changing');
    assert.deepEqual(
      app.discovered_tools.map((x) => [x.name, x.stale]),
      [
        ['a', false],
        ['b', false],
        ['c', false],
        ['d', false],
      ],
    );
    assert.deepEqual(app.discovered_tools[1]!.first_seen_at, firstSeen, 'first_seen_at stays');
  });

  it('drops the oldest stale tools past the per-app limits, never a listed one', async () => {
    const t = tenant();
    const server = keep(await startMcpServer({ transport: 'streamable', tools: tools('a', 'b', 'c') }));
    await create(t, { slug: 'pruned', mcp_server_url: server.url });
    const app = await settled(t, 'pruned');
    server.tools = tools('d');
    await probe(t, 'pruned');
    await pruneTools(apps.db, t.id, app.id, 2, 1_000_000);
    assert.deepEqual(
      (await get(t, 'pruned')).discovered_tools.map((x) => [x.name, x.stale]),
      [
        ['a', true],
        ['d', false],
      ],
    );
    await pruneTools(apps.db, t.id, app.id, 1, 1_000_000);
    assert.deepEqual(
      (await get(t, 'pruned')).discovered_tools.map((x) => x.name),
      ['d'],
    );
    await pruneTools(apps.db, t.id, app.id, 10, 1);
    assert.deepEqual(
      (await get(t, 'pruned')).discovered_tools.map((x) => x.name),
      ['d'],
      'a listed tool stays whatever its size',
    );
  });

  it('caps tools/list: a repeated cursor or 64 pages end the listing, which then marks nothing stale', async () => {
    const t = tenant();
    const repeat = keep(
      await startMcpServer({
        transport: 'streamable',
        tools: tools('a', 'b', 'c', 'd'),
        pageSize: 1,
        cursors: 'repeat',
      }),
    );
    await create(t, { slug: 'loops', mcp_server_url: repeat.url });
    let app = await settled(t, 'loops');
    assert.equal(app.status, AppStatus.APP_STATUS_HEALTHY);
    assert.deepEqual(
      app.discovered_tools.map((x) => x.name),
      ['a', 'b'],
      'page 1, then c1 once; its repetition ends it',
    );
    repeat.tools = tools('z', 'y');
    app = await probe(t, 'loops');
    assert.deepEqual(
      app.discovered_tools.map((x) => [x.name, x.stale]),
      [
        ['a', false],
        ['b', false],
        ['y', false],
        ['z', false],
      ],
      'an incomplete listing marks nothing stale',
    );

    const endless = keep(
      await startMcpServer({
        transport: 'streamable',
        tools: Array.from({ length: 100 }, (_, i) => ({ name: `t${String(i).padStart(3, '0')}` })),
        pageSize: 1,
        cursors: 'endless',
      }),
    );
    await create(t, { slug: 'endless', mcp_server_url: endless.url });
    app = await settled(t, 'endless');
    assert.equal(app.status, AppStatus.APP_STATUS_HEALTHY);
    assert.equal(app.discovered_tools.length, 64, 'at most 64 pages');

    // A page past what a probe reads (4 MiB): not read on, and the app says why.
    const huge = keep(
      await startMcpServer({ transport: 'streamable', tools: [{ name: 'big', description: 'd'.repeat(5_000_000) }] }),
    );
    await create(t, { slug: 'huge', mcp_server_url: huge.url });
    app = await settled(t, 'huge');
    assert.equal(app.status, AppStatus.APP_STATUS_PROTOCOL_ERROR);
    assert.match(app.status_reason ?? '', /exceeded 4194304 bytes and was not read/);
  });

  it("blanks the app's credential out of a tool result that echoes it (text, structured content, keys)", async () => {
    const t = tenant();
    const secret = 'echoed-secret-7d2e9b41';
    const server = keep(
      await startMcpServer({
        transport: 'streamable',
        auth: { header: 'authorization', value: `Bearer ${secret}` },
        tools: [{ name: 'whoami' }],
        onCall: () => ({
          content: [{ type: 'text', text: `you sent Bearer ${secret}` }],
          structuredContent: { [secret]: [`x${secret}x`] },
        }),
      }),
    );
    await create(t, { slug: 'echo', mcp_server_url: server.url, auth: { type: AuthType.AUTH_TYPE_BEARER, secret } });
    assert.equal((await settled(t, 'echo')).status, AppStatus.APP_STATUS_HEALTHY);
    await apps.client.call(S.updateApp, { slug: 'echo', enabled_tools: ['whoami'] }, t.call);
    const result = await apps.client.call(S.callTool, { slug: 'echo', name: 'whoami' }, t.call);
    assert.deepEqual(result.content, [{ type: 'text', text: 'you sent Bearer [redacted]' }]);
    assert.deepEqual(result.structured_content, { '[redacted]': ['x[redacted]x'] });
  });

  it('calls enabled tools with the stored auth; 409 when not enabled or stale, 503 when the server is down', async () => {
    const t = tenant();
    const server = keep(await startHighLevelMcpServer({ header: 'authorization', value: `Bearer ${BEARER}` }));
    await create(t, {
      slug: 'calc',
      mcp_server_url: server.url,
      auth: { type: AuthType.AUTH_TYPE_BEARER, secret: BEARER },
    });
    const app = await settled(t, 'calc');
    assert.deepEqual(
      app.discovered_tools.map((x) => x.name),
      ['add', 'fail'],
    );
    const notEnabled = await failure(
      apps.client.call(S.callTool, { slug: 'calc', name: 'add', arguments: { a: 1, b: 2 } }, t.call),
    );
    assert.deepEqual([notEnabled.code, notEnabled.reason], [grpc.status.FAILED_PRECONDITION, 'APP_TOOL_NOT_ENABLED']);
    assert.deepEqual(
      await badFields(apps.client.call(S.updateApp, { slug: 'calc', enabled_tools: ['add', 'nope'] }, t.call)),
      ['enabled_tools[1]'],
    );
    await apps.client.call(S.updateApp, { slug: 'calc', enabled_tools: ['add', 'fail'] }, t.call);
    const sum = await apps.client.call(S.callTool, { slug: 'calc', name: 'add', arguments: { a: 2, b: 3 } }, t.call);
    assert.deepEqual([sum.is_error, sum.content], [false, [{ type: 'text', text: '5' }]]);
    assert.deepEqual(server.calls.at(-1)!.arguments, { a: 2, b: 3 });
    assert.equal(
      server.calls.at(-1)!.headers.authorization,
      `Bearer ${BEARER}`,
      'the server saw the stored credential',
    );
    const failed = await apps.client.call(S.callTool, { slug: 'calc', name: 'fail' }, t.call);
    assert.deepEqual(
      [failed.is_error, failed.content],
      [true, [{ type: 'text', text: 'it broke' }]],
      'an MCP error result is a normal answer',
    );

    // Stale: the listing no longer has it.
    await apps.db.query("UPDATE app_tools SET stale = true WHERE tenant_id = $1 AND name = 'fail'", [t.id]);
    const stale = await failure(apps.client.call(S.callTool, { slug: 'calc', name: 'fail' }, t.call));
    assert.deepEqual([stale.code, stale.reason], [grpc.status.FAILED_PRECONDITION, 'APP_TOOL_STALE']);

    await server.close();
    const down = await failure(
      apps.client.call(S.callTool, { slug: 'calc', name: 'add', arguments: { a: 1, b: 1 } }, t.call),
    );
    assert.deepEqual(
      [down.code, down.reason, down.metadata.app_slug, down.metadata.status],
      [grpc.status.UNAVAILABLE, 'APP_UNREACHABLE', 'calc', 'unreachable'],
    );
    assert.match(down.message, /could not reach/);
  });

  it('audits every tool call (actor, app, tool, outcome, duration) and never its arguments or result', async () => {
    const t = tenant();
    const ARG = 'argument-sentinel-5b1e';
    const RESULT = 'result-sentinel-9c3d';
    const server = keep(
      await startMcpServer({
        transport: 'streamable',
        tools: tools('look', 'oops'),
        onCall: (name) => ({ content: [{ type: 'text', text: `${name}: ${RESULT}` }], isError: name === 'oops' }),
      }),
    );
    await create(t, { slug: 'audited', mcp_server_url: server.url });
    await settled(t, 'audited');
    await apps.client.call(S.updateApp, { slug: 'audited', enabled_tools: ['look', 'oops'] }, t.call);
    const call = (name: string, caller = t.call) =>
      apps.client.call(S.callTool, { slug: 'audited', name, arguments: { q: ARG } }, caller);
    await call('look');
    // An agent run calls the same rpc as its agent: actor type agent, id the run's.
    const runId = crypto.randomUUID();
    const asRun = { caller: { requestId: runId, tenantId: t.id, actor: { type: 'agent', id: runId } } };
    assert.equal((await call('oops', asRun)).is_error, true);
    await server.close();
    assert.equal((await failure(call('look'))).code, grpc.status.UNAVAILABLE);
    // A refused call (not enabled) reaches no server and is no tool call: nothing recorded.
    assert.equal((await failure(call('nope'))).code, grpc.status.FAILED_PRECONDITION);

    const { rows } = await apps.db.query(
      `SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'app.tool_called' ORDER BY seq`,
      [t.id],
    );
    const events = rows.map((r) => decodeEvent(r.payload));
    const app = await get(t, 'audited');
    assert.deepEqual(
      events.map((e) => [e.actor?.type, e.resource?.type, e.resource?.id, e.metadata]),
      [
        [
          'api_key',
          'app',
          app.id,
          {
            app_slug: 'audited',
            tool: 'look',
            outcome: 'ok',
            duration_ms: events[0]!.metadata.duration_ms,
            member_id: t.memberId,
          },
        ],
        [
          'agent',
          'app',
          app.id,
          { app_slug: 'audited', tool: 'oops', outcome: 'is_error', duration_ms: events[1]!.metadata.duration_ms },
        ],
        [
          'api_key',
          'app',
          app.id,
          {
            app_slug: 'audited',
            tool: 'look',
            outcome: 'failed',
            failure_category: 'unreachable',
            duration_ms: events[2]!.metadata.duration_ms,
            member_id: t.memberId,
          },
        ],
      ],
    );
    assert.equal(events[1]!.actor?.id, runId);
    for (const e of events)
      assert.ok(Number.isInteger(e.metadata.duration_ms) && (e.metadata.duration_ms as number) >= 0);
    for (const r of rows) {
      const text = Buffer.from(r.payload).toString('latin1');
      assert.ok(!text.includes(ARG) && !text.includes(RESULT), 'neither the arguments nor the result are recorded');
    }
  });

  it("lists the enabled, non-stale tools of the tenant's healthy apps for agents", async () => {
    const t = tenant();
    const other = tenant();
    const server = keep(await startMcpServer({ transport: 'streamable', tools: tools('a', 'b', 'c') }));
    await create(t, { slug: 'good', mcp_server_url: server.url });
    await create(other, { slug: 'other', mcp_server_url: server.url });
    await settled(t, 'good');
    await settled(other, 'other');
    await apps.client.call(S.updateApp, { slug: 'good', enabled_tools: ['a', 'c'] }, t.call);
    await apps.client.call(S.updateApp, { slug: 'other', enabled_tools: ['b'] }, other.call);
    await apps.db.query("UPDATE app_tools SET stale = true WHERE tenant_id = $1 AND name = 'c'", [t.id]);
    await create(t, { slug: 'broken', mcp_server_url: await downUrl() });
    const listed = await apps.client.call(S.listAgentTools, {}, t.call);
    assert.deepEqual(
      listed.tools.map((x) => [x.app_slug, x.name, x.description]),
      [['good', 'a', 'does a']],
    );
    assert.deepEqual(listed.tools[0]!.input_schema, { type: 'object', properties: { q: { type: 'string' } } });
  });
});

describe('apps under the egress policy (EGRESS_ALLOW_PRIVATE=false)', () => {
  let apps: Apps;
  let server: McpTestServer;
  before(async () => {
    server = await startMcpServer({ transport: 'streamable', tools: tools('a') });
    // A public-looking host name that resolves to loopback (DNS rebinding): refused at connect time.
    apps = await startApps({
      egress: { allowPrivate: false, resolve: async () => [{ address: '127.0.0.1', family: 4 }] },
    });
  });
  after(async () => {
    await apps.stop();
    await server.close();
  });

  it('refuses private, loopback and plain-http URLs when written, naming mcp_server_url', async () => {
    const t = tenant();
    for (const url of [
      server.url,
      'https://127.0.0.1/mcp',
      'https://10.1.2.3/mcp',
      'https://169.254.169.254/latest',
      'https://localhost/mcp',
      'https://[::1]/mcp',
      'https://2130706433/mcp',
      'http://mcp.example.com/mcp',
    ]) {
      const err = await failure(
        apps.client.call(S.createApp, { slug: 'x-app', display_name: 'x', mcp_server_url: url }, t.call),
      );
      assert.deepEqual(
        [err.code, err.fieldViolations.map((v) => v.field)],
        [grpc.status.INVALID_ARGUMENT, ['mcp_server_url']],
        url,
      );
    }
    await apps.client.call(
      S.createApp,
      { slug: 'ok', display_name: 'x', mcp_server_url: 'https://mcp.example.com/mcp' },
      t.call,
    );
    const patched = await failure(
      apps.client.call(
        S.updateApp,
        { slug: 'ok', mcp_server_url: 'https://192.168.1.1/mcp', enabled_tools: [] },
        t.call,
      ),
    );
    assert.deepEqual(
      patched.fieldViolations.map((v) => v.field),
      ['mcp_server_url'],
    );
  });

  it('refuses whitespace and control characters in mcp_server_url (400 naming it) on create and patch, and stores nothing', async () => {
    const t = tenant();
    await apps.client.call(
      S.createApp,
      { slug: 'ok', display_name: 'x', mcp_server_url: 'https://mcp.example.com/mcp' },
      t.call,
    );
    for (const url of [
      'https://mcp.example.com/mcp\r\nX-Injected: 1',
      'https://mcp.example.com/mcp\r\n',
      ' https://mcp.example.com/mcp',
      'https://mcp.example.com/a b',
      'https://mcp.example.com/a\tb',
    ]) {
      for (const call of [
        apps.client.call(S.createApp, { slug: 'crlf', display_name: 'x', mcp_server_url: url }, t.call),
        apps.client.call(S.updateApp, { slug: 'ok', mcp_server_url: url, enabled_tools: [] }, t.call),
      ]) {
        const err = await failure(call);
        assert.deepEqual(
          [err.code, err.fieldViolations.map((v) => [v.field, v.description])],
          [
            grpc.status.INVALID_ARGUMENT,
            [
              [
                'mcp_server_url',
                'must not contain whitespace or control characters; percent-encode them (a space is %20)',
              ],
            ],
          ],
          JSON.stringify(url),
        );
      }
    }
    const { rows } = await apps.db.query('SELECT slug, mcp_server_url FROM apps WHERE tenant_id = $1', [t.id]);
    assert.deepEqual(rows, [{ slug: 'ok', mcp_server_url: 'https://mcp.example.com/mcp' }]);
  });

  it('a host name resolving to a refused address is unreachable, refused by the egress policy, with no request sent', async () => {
    const t = tenant();
    await apps.client.call(
      S.createApp,
      { slug: 'rebind', display_name: 'x', mcp_server_url: 'https://rebind.example.com/mcp' },
      t.call,
    );
    const app = await apps.client.call(S.probeApp, { slug: 'rebind' }, t.call);
    assert.equal(app.status, AppStatus.APP_STATUS_UNREACHABLE);
    assert.match(
      app.status_reason!,
      /^destination not allowed: the host rebind\.example\.com resolves to a loopback address, which the egress policy refuses; /,
    );
    assert.equal(app.status_reason!.includes('127.0.0.1'), false);
    assert.equal(server.requests.length, 0);
  });
});

describe('failure texts of apps reached by name', () => {
  let apps: Apps;
  before(async () => {
    // Every name resolves to loopback, where the test servers listen (a private network, allowed).
    apps = await startApps({
      egress: { allowPrivate: true, resolve: async () => [{ address: '127.0.0.1', family: 4 }] },
    });
  });
  after(() => apps.stop());

  it('never name the address the host resolved to, in a tool call error or a probe status_reason', async () => {
    const t = tenant();
    const server = await startMcpServer({ transport: 'streamable', tools: tools('a') });
    const url = server.url.replace('127.0.0.1', 'mcp.internal.test');
    await apps.client.call(S.createApp, { slug: 'named', display_name: 'x', mcp_server_url: url }, t.call);
    const healthy = await apps.client.call(S.probeApp, { slug: 'named' }, t.call);
    assert.equal(healthy.status, AppStatus.APP_STATUS_HEALTHY, healthy.status_reason);
    await apps.client.call(S.updateApp, { slug: 'named', enabled_tools: ['a'] }, t.call);
    await server.close();

    const down = await failure(apps.client.call(S.callTool, { slug: 'named', name: 'a' }, t.call));
    assert.deepEqual([down.code, down.reason], [grpc.status.UNAVAILABLE, 'APP_UNREACHABLE']);
    assert.match(down.message, /could not reach http:\/\/mcp\.internal\.test:\d+: the connection was refused/);
    assert.equal(down.message.includes('127.0.0.1'), false, down.message);
    const probed = await apps.client.call(S.probeApp, { slug: 'named' }, t.call);
    assert.equal(probed.status, AppStatus.APP_STATUS_UNREACHABLE);
    assert.match(probed.status_reason!, /the connection was refused/);
    assert.equal(probed.status_reason!.includes('127.0.0.1'), false, probed.status_reason);
  });
});
