import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { DescFile } from '@bufbuild/protobuf';
import { loadSchema } from '@workauto/protos';
import { buildRoutes, compileTemplate, loadRoutes, matchRoute, serviceFiles } from './routes.js';
import { fixtureFile } from '@workauto/protos/fixtures';
import { DOMAINS } from '@workauto/grpc';

/** Files of the product's descriptor set (their codecs loaded by loadRoutes). */
const routes = await loadRoutes();
const protoFile = (name: string): DescFile[] => serviceFiles(loadSchema()).filter((f) => f.proto.name === name);
const identityRoutes = buildRoutes(protoFile('workauto/identity/v1/identity.proto'));
const fixtureRoutes = buildRoutes(fixtureFile('fixture'));

describe('route table', () => {
  it('is built from the annotations, literal segments first', () => {
    const claim = matchRoute(identityRoutes, 'POST', '/api/v1/invitations/claim');
    assert.ok(claim && 'route' in claim && claim.route.rpc === 'ClaimInvitation' && claim.route.auth === 'none');
    const get = matchRoute(identityRoutes, 'GET', '/api/v1/members/abc');
    assert.ok(
      get && 'route' in get && get.params.id === 'abc' && get.route.domain === 'members' && get.route.level === 'read',
    );
    assert.equal(get.route.downstream, 'identity');
    assert.equal(get.route.grpcPath, '/workauto.identity.v1.IdentityService/GetMember');
    const wrong = matchRoute(identityRoutes, 'PUT', '/api/v1/members/abc');
    assert.ok(
      wrong &&
        'methodNotAllowed' in wrong &&
        wrong.methodNotAllowed.includes('GET') &&
        wrong.methodNotAllowed.includes('PATCH'),
    );
    assert.equal(matchRoute(identityRoutes, 'GET', '/api/v1/nothing'), undefined);
    assert.equal(
      identityRoutes.some((r) => r.rpc === 'AuthenticateToken'),
      false,
      'rpcs without an annotation are not routable',
    );
  });

  it('matches every path as a scan of all routes in order would (the index only narrows the candidates)', () => {
    const scan = (method: string, path: string) => {
      const hits = routes.filter((r) => r.pattern.test(path));
      const route = hits.find((r) => r.method === method);
      return route ? route.rpc : hits.length ? [...new Set(hits.map((r) => r.method))].sort().join(',') : undefined;
    };
    const viaIndex = (method: string, path: string) => {
      const m = matchRoute(routes, method, path);
      return m && 'route' in m
        ? m.route.rpc
        : m && 'methodNotAllowed' in m
          ? [...m.methodNotAllowed].sort().join(',')
          : undefined;
    };
    const paths = routes.flatMap((r) => {
      const concrete = r.template.replace(/\{[a-z_0-9]+\}/g, 'x%2Fy');
      return [
        concrete,
        `${concrete}/`,
        `${concrete}//`,
        `${concrete}/extra`,
        concrete.replace(/\/[^/]+$/, '/claim'),
        concrete.toUpperCase(),
      ];
    });
    paths.push('/', '', '/api', '/api/v1', '/api/v1/', '/healthz');
    let matched = 0;
    for (const path of paths) {
      for (const method of ['GET', 'POST', 'PATCH', 'PUT', 'DELETE']) {
        const expected = scan(method, path);
        assert.equal(viaIndex(method, path), expected, `${method} ${path}`);
        if (expected && !expected.includes(',') && !/^[A-Z]+$/.test(expected)) matched++;
      }
    }
    assert.ok(matched >= routes.length, `every route is reached (${matched} of ${routes.length})`);
  });

  it('sets success codes: 201 for Create*, 204 for Empty, 302 for a Redirect, else 200', () => {
    const status = (rpc: string) => identityRoutes.find((r) => r.rpc === rpc)!.successStatus;
    assert.equal(status('CreateInvitation'), 201);
    assert.equal(status('CreateTenant'), 201);
    assert.equal(status('DeleteIntegrationKey'), 204);
    assert.equal(status('CompleteOAuthAuthorization'), 302);
    assert.equal(status('DeactivateMember'), 200);
  });

  it('reads policies: platform admin, none, default api key, domain and level', () => {
    const by = (rpc: string) => fixtureRoutes.find((r) => r.rpc === rpc)!;
    assert.equal(by('DeleteThing').auth, 'platform_admin');
    assert.equal(by('PublicThing').auth, 'none');
    assert.deepEqual([by('GetThing').auth, by('GetThing').domain], ['api_key', '']);
    assert.deepEqual([by('CreateThing').domain, by('CreateThing').level], ['crm', 'write']);
    assert.equal(by('ListThings').responseBody, 'data');
    assert.equal(by('SetLabel').body, 'label');
    assert.equal(by('SetLabel').downstream, 'fixture');
    assert.equal(
      fixtureRoutes.some((r) => r.rpc === 'Internal'),
      false,
    );
  });

  it('loads every service proto of the repository', () => {
    assert.ok(routes.some((r) => r.rpc === 'CreateTenant'));
    assert.ok(routes.every((r) => !['api', 'events'].includes(r.downstream)));
  });

  it('decodes path variables, and refuses broken percent-encoding', () => {
    const m = matchRoute(fixtureRoutes, 'PUT', '/api/v1/things/abc/labels/a%2Fb%20c');
    assert.ok(m && 'route' in m);
    assert.deepEqual(m.params, { thing_id: 'abc', key: 'a/b c' });
    assert.deepEqual(matchRoute(fixtureRoutes, 'PUT', '/api/v1/things/abc/labels/%E0%A4%A'), { badPath: 'key' });
    const trailing = matchRoute(fixtureRoutes, 'GET', '/api/v1/things/');
    assert.ok(trailing && 'route' in trailing && trailing.route.rpc === 'ListThings', 'a trailing slash is tolerated');
  });
});

describe('path templates', () => {
  it('compile into anchored patterns', () => {
    const t = compileTemplate('/api/v1/members/{member_id}/access-policies');
    assert.deepEqual(t.params, ['member_id']);
    assert.equal(t.literals, 4);
    assert.equal(t.pattern.test('/api/v1/members/x/access-policies'), true);
    assert.equal(t.pattern.test('/api/v1/members/x/access-policies/extra'), false);
    assert.equal(t.pattern.test('/api/v1/members//access-policies'), false);
    assert.equal(t.pattern.test('/api/v1/members/x/y/access-policies'), false, 'a variable is one segment');
    assert.equal(compileTemplate('/api/v1/a.b').pattern.test('/api/v1/aXb'), false, 'literal dots are literal');
  });

  it("give rpcs that wait on a tenant's server their declared deadline; internal apps rpcs get no route", () => {
    const apps = buildRoutes(protoFile('workauto/apps/v1/apps.proto'));
    const by = (rpc: string) => apps.find((r) => r.rpc === rpc);
    assert.equal(by('ProbeApp')!.deadlineMs, 20_000);
    assert.equal(by('CallTool')!.deadlineMs, 70_000);
    assert.equal(by('GetApp')!.deadlineMs, undefined, 'the gateway default applies');
    assert.equal(by('ListAgentTools'), undefined, 'ListAgentTools is for the agents service only');
    // An OAuth app's consent: the authorization server sends the browser to the callback, with no credential.
    const callback = by('CompleteAppOAuth')!;
    assert.deepEqual(
      [callback.method, callback.template, callback.auth, callback.successStatus],
      ['GET', '/api/v1/apps/oauth/callback', 'none', 302],
    );
    assert.deepEqual(
      [by('AuthorizeAppOAuth')!.template, by('AuthorizeAppOAuth')!.auth, by('AuthorizeAppOAuth')!.deadlineMs],
      ['/api/v1/apps/{slug}/oauth/authorize', 'api_key', 20_000],
    );
    assert.equal(by('DisconnectAppOAuth')!.method, 'DELETE');
  });

  it('refuse what the gateway cannot serve, at start-up', () => {
    assert.throws(() => compileTemplate('/api/v1/{name=things/*}'), /neither a literal nor/);
    assert.throws(() => compileTemplate('/api/v1/things/{id}:cancel'), /neither a literal nor/);
    assert.throws(() => compileTemplate('/api/v1/{id}/{id}'), /twice/);
    assert.throws(() => compileTemplate('api/v1'), /start with/);
  });

  it('must bind real fields, and two rpcs cannot claim one route', () => {
    // libs/protos/test-protos/fixtures/bad_*.proto
    assert.throws(() => buildRoutes(fixtureFile('bad_path')), /\{nope\} is not a field/);
    assert.throws(() => buildRoutes(fixtureFile('bad_body')), /body "nope"/);
    assert.throws(() => buildRoutes(fixtureFile('bad_response_body')), /response_body "nope"/);
    assert.throws(() => buildRoutes(fixtureFile('bad_custom')), /exactly one of/);
    assert.throws(() => buildRoutes(fixtureFile('bad_twice')), /both claim GET/);
    assert.throws(() => buildRoutes(fixtureFile('bad_token')), /AUTH_API_KEY_OR_TOKEN needs a GET route/);
    assert.throws(() => buildRoutes(fixtureFile('bad_token_field')), /string request field `token`/);
    assert.throws(
      () => buildRoutes(fixtureFile('bad_domain')),
      /policy names domain "note", not one of members, audit, agents, apps, calendar, crm, notes, tasks, webhooks, integrations/,
    );
  });

  it('take their domains and levels from the one list every policy names, and each domain guards some route', () => {
    assert.deepEqual(new Set(routes.filter((r) => r.domain).map((r) => r.domain)), new Set(DOMAINS));
    assert.deepEqual(new Set(routes.filter((r) => r.domain).map((r) => r.level)), new Set(['read', 'write', 'admin']));
  });

  it('let the calendar feed alone take a token instead of an API key', () => {
    const byToken = routes.filter((r) => r.auth === 'api_key_or_token').map((r) => `${r.method} ${r.template}`);
    assert.deepEqual(byToken, ['GET /api/v1/calendars/{id}/events.ics']);
  });

  it('serves google.api.HttpBody responses on GET routes only (a raw body is not a replayable JSON response)', () => {
    assert.equal(buildRoutes(fixtureFile('raw_get'))[0]!.responseType.desc.typeName, 'google.api.HttpBody');
    assert.throws(() => buildRoutes(fixtureFile('raw_post')), /HttpBody responses are for GET routes only/);
  });

  it('routes server-streaming rpcs of google.api.HttpBody (their chunks are piped), and no other stream', () => {
    const [feed] = buildRoutes(fixtureFile('stream_feed'));
    assert.deepEqual([feed!.stream, feed!.contentTypes], [true, ['application/x-ndjson', 'text/csv']]);
    const calendarFeed = routes.find((r) => r.template === '/api/v1/calendars/{id}/events.ics')!;
    assert.deepEqual(
      [calendarFeed.rpc, calendarFeed.stream, calendarFeed.contentTypes],
      ['StreamCalendarFeed', true, ['text/calendar']],
    );
    assert.throws(() => buildRoutes(fixtureFile('stream_json')), /only a stream of google.api.HttpBody/);
    assert.throws(() => buildRoutes(fixtureFile('stream_client')), /client-streaming rpcs cannot be routed/);
  });
});

describe("main.ts's own modules", () => {
  it('load nothing OpenTelemetry instruments (grpc-js, pg, http servers) before telemetry starts', () => {
    // A fresh process: this one has loaded grpc-js already. main.js's static imports of its own
    // modules (cors.js, which loads routes.js, …) run before runProcess starts telemetry.
    const main = readFileSync(new URL('./main.js', import.meta.url), 'utf8');
    const own = [...main.matchAll(/^import [^;]*? from '(\.\/[^']+)';$/gm)].map((m) => m[1]!);
    assert.ok(own.includes('./cors.js'), `main.js imports: ${own.join(', ')}`);
    const script = `
      for (const m of ${JSON.stringify(own)}) await import(new URL(m, ${JSON.stringify(import.meta.url)}).href);
      const { createRequire } = await import('node:module');
      console.log(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const loaded = (JSON.parse(out) as string[]).filter((path) =>
      /node_modules\/(@grpc\/grpc-js|pg|express)\//.test(path),
    );
    assert.deepEqual(loaded, []);
  });
});
