import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { captureLogs, freePort } from '@workauto/testing';
import type { Schemas, WorkautoClient } from '@workauto/client';
import { answer, fails, ok, startTestStack, type TestStack, type TenantFixture } from './harness.js';
import { startFakeIdp } from './fake-idp.js';

const logs = captureLogs();
/** Every secret the API hands out in this file; none may appear in a later response or any log line. */
const secrets: string[] = [];

type Role = 'owner' | 'admin' | 'member' | 'viewer';

describe('identity end to end', () => {
  let stack: TestStack;
  let idp: Awaited<ReturnType<typeof startFakeIdp>>;
  let tenant: TenantFixture;
  const keys = {} as Record<Role, string>;
  const ids = {} as Record<Role, string>;
  /** The owner's client. */
  let owner: WorkautoClient;
  const byId = (id: string) => ({ params: { path: { id } } });
  const ofMember = (member_id: string) => ({ params: { path: { member_id } } });
  const provider = (name: string) => ({ params: { path: { provider: name } } });
  const viaIdp = (idp: string) => ({ params: { path: { idp } } });

  before(async () => {
    idp = await startFakeIdp({ clientId: 'workauto-test', clientSecret: 'idp-client-secret-value' });
    const port = await freePort();
    stack = await startTestStack({
      gatewayPort: port,
      oauth: {
        providers: {
          fake: {
            issuer: idp.issuer,
            client_id: 'workauto-test',
            client_secret: 'idp-client-secret-value',
            scopes: ['openid', 'email'],
          },
        },
        redirectBaseUrl: `http://127.0.0.1:${port}`,
        allowedReturnOrigins: ['https://app.example.com'],
      },
    });
    tenant = await stack.createTenant('Matrix');
    owner = stack.client(tenant.key);
    secrets.push(tenant.key, stack.adminToken);
    keys.owner = tenant.key;
    ids.owner = tenant.ownerId;
    for (const role of ['admin', 'member', 'viewer'] as const) {
      const m = await newMember(role);
      keys[role] = m.key;
      ids[role] = m.id;
    }
  });
  after(async () => {
    await stack?.stop();
    await idp?.close();
  });

  /** Invites and claims a member of a role through the API; returns its id and first key. */
  async function newMember(role: Role, policies: Schemas['AccessPolicyInput'][] = []) {
    const inv = await ok(
      owner.POST('/api/v1/invitations', {
        body: { email: `${role}-${randomUUID()}@matrix.test`, role, access_policies: policies },
      }),
      201,
    );
    secrets.push(inv.code!);
    const claimed = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
    secrets.push(claimed.api_key);
    return { id: claimed.member!.id, key: claimed.api_key };
  }

  it('claims an invitation into a member, its policies and a working key', async () => {
    const inv = await ok(
      owner.POST('/api/v1/invitations', {
        body: {
          email: 'new@matrix.test',
          name: 'New Person',
          role: 'member',
          access_policies: [{ domain: 'audit', access_level: 'read' }],
        },
      }),
      201,
    );
    assert.equal(inv.status, 'pending');
    const code = inv.code!;
    secrets.push(code);
    const listed = await ok(owner.GET('/api/v1/invitations'));
    assert.equal(JSON.stringify(listed).includes(code), false, 'codes are never listed');
    const claim = () => stack.client().POST('/api/v1/invitations/claim', { body: { code } });
    const claimed = await ok(claim());
    secrets.push(claimed.api_key);
    assert.equal(claimed.member!.name, 'New Person');
    assert.equal(claimed.member!.role, 'member');
    assert.equal(claimed.member!.is_active, true);
    assert.deepEqual(
      claimed.access_policies.map((p) => [p.domain, p.access_level]),
      [['audit', 'read']],
    );
    await ok(stack.client(claimed.api_key).GET('/api/v1/members/{id}', byId(claimed.member!.id)));
    await fails(claim(), 409, 'INVITATION_ALREADY_CLAIMED');
    await fails(stack.client().POST('/api/v1/invitations/claim', { body: { code: 'inv_nope' } }), 404);
  });

  it('yields exactly one member from 20 parallel claims of one code', async () => {
    const inv = await ok(
      owner.POST('/api/v1/invitations', { body: { email: 'race@matrix.test', role: 'viewer' } }),
      201,
    );
    secrets.push(inv.code!);
    const results = await Promise.all(
      Array.from({ length: 20 }, () => stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } })),
    );
    const statuses = results.map((r) => r.response.status).sort();
    const others = results.filter((r) => r.response.status !== 200 && r.response.status !== 409);
    assert.deepEqual(
      statuses,
      [200, ...Array(19).fill(409)],
      `answers besides 200 and 409: ${JSON.stringify(others.map((r) => r.error))}; warnings: ${logs
        .text()
        .split('\n')
        .filter((l) => /"level":"(warn|error|fatal)"/.test(l))
        .slice(-10)
        .join('\n')}`,
    );
    for (const r of results) if (r.data) secrets.push(r.data.api_key);
    const all = await ok(owner.GET('/api/v1/members', { params: { query: { limit: 200 } } }));
    assert.equal(all.data.filter((m) => m.email === 'race@matrix.test').length, 1);
  });

  it('answers every identity endpoint with 2xx or 403 per role, as docs/api.md §3 says', async () => {
    const matrixKey = { ...provider('matrix'), body: { credential: 'matrix-credential-0001' } };
    await owner.PUT('/api/v1/integration-keys/{provider}', matrixKey);
    secrets.push('matrix-credential-0001');
    const ensureKey = () => owner.PUT('/api/v1/integration-keys/{provider}', matrixKey);
    const freshInvitation = async () => {
      const r = await ok(
        owner.POST('/api/v1/invitations', { body: { email: `t-${randomUUID()}@matrix.test`, role: 'viewer' } }),
        201,
      );
      secrets.push(r.code!);
      return r.id;
    };
    // Each endpoint: how to call it as a role (fresh targets for destructive calls), and whether it needs admin.
    type Call = {
      name: string;
      admin: boolean;
      run: (as: WorkautoClient, role: Role) => Promise<{ response: Response }>;
    };
    const calls: Call[] = [
      { name: 'GET /members', admin: false, run: (as) => as.GET('/api/v1/members') },
      { name: 'GET /members/{id}', admin: false, run: (as) => as.GET('/api/v1/members/{id}', byId(ids.owner)) },
      {
        name: 'PATCH /members/{id}',
        admin: true,
        run: async (as) =>
          as.PATCH('/api/v1/members/{id}', { ...byId((await newMember('viewer')).id), body: { name: 'Renamed' } }),
      },
      {
        name: 'DELETE /members/{id}',
        admin: true,
        run: async (as) => as.DELETE('/api/v1/members/{id}', byId((await newMember('viewer')).id)),
      },
      {
        name: 'GET /members/{id}/access-policies',
        admin: false,
        run: (as) => as.GET('/api/v1/members/{member_id}/access-policies', ofMember(ids.viewer)),
      },
      {
        name: 'PUT /members/{id}/access-policies',
        admin: true,
        run: async (as) =>
          as.PUT('/api/v1/members/{member_id}/access-policies', {
            ...ofMember((await newMember('viewer')).id),
            body: { policies: [] },
          }),
      },
      {
        name: 'POST /invitations',
        admin: true,
        run: (as) => as.POST('/api/v1/invitations', { body: { email: 'x@matrix.test', role: 'viewer' } }),
      },
      { name: 'GET /invitations', admin: true, run: (as) => as.GET('/api/v1/invitations') },
      {
        name: 'DELETE /invitations/{id}',
        admin: true,
        run: async (as) => as.DELETE('/api/v1/invitations/{id}', byId(await freshInvitation())),
      },
      { name: 'GET /api-keys', admin: false, run: (as) => as.GET('/api/v1/api-keys') },
      { name: 'POST /api-keys', admin: false, run: (as) => as.POST('/api/v1/api-keys', { body: { name: 'matrix' } }) },
      {
        name: 'DELETE /api-keys/{own id}',
        admin: false,
        run: async (as) => {
          const created = await ok(as.POST('/api/v1/api-keys', { body: { name: 'to revoke' } }), 201);
          secrets.push(created.api_key!);
          return as.DELETE('/api/v1/api-keys/{id}', byId(created.id));
        },
      },
      { name: 'GET /integration-keys', admin: true, run: (as) => as.GET('/api/v1/integration-keys') },
      {
        name: 'GET /integration-keys/{provider}',
        admin: true,
        run: async (as) => (await ensureKey(), as.GET('/api/v1/integration-keys/{provider}', provider('matrix'))),
      },
      {
        name: 'PUT /integration-keys/{provider}',
        admin: true,
        run: (as) => as.PUT('/api/v1/integration-keys/{provider}', matrixKey),
      },
      {
        name: 'DELETE /integration-keys/{provider}',
        admin: true,
        run: async (as) => (await ensureKey(), as.DELETE('/api/v1/integration-keys/{provider}', provider('matrix'))),
      },
      {
        name: 'POST /oauth/{idp}/authorize',
        admin: true,
        run: (as) =>
          as.POST('/api/v1/oauth/{idp}/authorize', {
            ...viaIdp('fake'),
            body: { connection_id: randomUUID(), return_to: 'https://app.example.com/done' },
          }),
      },
      { name: 'GET /audit-log', admin: true, run: (as) => as.GET('/api/v1/audit-log') },
    ];
    const table: string[] = [];
    const mismatches: string[] = [];
    for (const c of calls) {
      const row: string[] = [];
      for (const role of ['owner', 'admin', 'member', 'viewer'] as const) {
        const { status } = (await c.run(stack.client(keys[role]), role)).response;
        const allowed = !c.admin || role === 'owner' || role === 'admin';
        row.push(String(status));
        if (allowed ? status < 200 || status > 299 : status !== 403) mismatches.push(`${c.name} as ${role}: ${status}`);
      }
      table.push(`| ${c.name} | ${row.join(' | ')} |`);
    }
    assert.deepEqual(mismatches, [], `\n| endpoint | owner | admin | member | viewer |\n${table.join('\n')}`);
  });

  it('lets nobody escalate: no own role or policies, no role or level above their own, no acting on a higher rank (docs/api.md §3)', async () => {
    const membersAdmin = await newMember('member', [{ domain: 'members', access_level: 'admin' }]);
    const actors = { ...keys, membersAdmin: membersAdmin.key };
    const self = { ...ids, membersAdmin: membersAdmin.id };
    type Actor = keyof typeof actors;
    const email = () => `e-${randomUUID()}@matrix.test`;
    const fresh = async (role: Role) => (await newMember(role)).id;
    type Answer = Promise<{ data?: unknown; error?: unknown; response: Response }>;
    // The requests the cases make, on a target made fresh where the call changes it.
    const setRole = async (as: WorkautoClient, target: Role, role: Role) =>
      as.PATCH('/api/v1/members/{id}', { ...byId(await fresh(target)), body: { role } });
    const setPolicies = async (as: WorkautoClient, target: Role, policies: Schemas['AccessPolicyInput'][]) =>
      as.PUT('/api/v1/members/{member_id}/access-policies', { ...ofMember(await fresh(target)), body: { policies } });
    const deactivate = async (as: WorkautoClient, target: Role) =>
      as.DELETE('/api/v1/members/{id}', byId(await fresh(target)));
    const invite = (as: WorkautoClient, role: Role, access_policies?: Schemas['AccessPolicyInput'][]) =>
      as.POST('/api/v1/invitations', {
        body: { email: email(), role, ...(access_policies ? { access_policies } : {}) },
      });
    const mintKeyFor = async (as: WorkautoClient, target: Role) =>
      as.POST('/api/v1/api-keys', { body: { name: 'mine now', member_id: await fresh(target) } });
    // [what, actor, request, expected status, expected reason].
    type Case = [string, Actor, (as: WorkautoClient) => Answer, number, string?];
    const cases: Case[] = [];
    for (const actor of ['owner', 'admin', 'member', 'viewer', 'membersAdmin'] as const) {
      const ownReason = actor === 'member' || actor === 'viewer' ? 'ACCESS_DENIED' : 'OWN_ACCESS_CHANGE'; // the gateway stops those without members admin first
      cases.push(
        [
          'own role up',
          actor,
          (as) =>
            as.PATCH('/api/v1/members/{id}', {
              ...byId(self[actor]),
              body: { role: actor === 'owner' ? 'admin' : 'owner' },
            }),
          403,
          ownReason,
        ],
        [
          'own policies',
          actor,
          (as) =>
            as.PUT('/api/v1/members/{member_id}/access-policies', {
              ...ofMember(self[actor]),
              body: { policies: [{ domain: 'integrations', access_level: 'admin' }] },
            }),
          403,
          ownReason,
        ],
      );
    }
    cases.push(
      // Roles: up to one's own, never above.
      ['owner makes an owner', 'owner', (as) => setRole(as, 'viewer', 'owner'), 200],
      ['admin makes an admin', 'admin', (as) => setRole(as, 'viewer', 'admin'), 200],
      ['admin makes an owner', 'admin', (as) => setRole(as, 'viewer', 'owner'), 403, 'ROLE_ABOVE_OWN'],
      ['admin invites an owner', 'admin', (as) => invite(as, 'owner'), 403, 'ROLE_ABOVE_OWN'],
      ['admin invites an admin', 'admin', (as) => invite(as, 'admin'), 201],
      ['members admin makes a member', 'membersAdmin', (as) => setRole(as, 'viewer', 'member'), 200],
      ['members admin makes an admin', 'membersAdmin', (as) => setRole(as, 'viewer', 'admin'), 403, 'ROLE_ABOVE_OWN'],
      ['members admin invites an admin', 'membersAdmin', (as) => invite(as, 'admin'), 403, 'ROLE_ABOVE_OWN'],
      ['member invites a viewer', 'member', (as) => invite(as, 'viewer'), 403, 'ACCESS_DENIED'],
      ['viewer makes a member', 'viewer', (as) => setRole(as, 'viewer', 'member'), 403, 'ACCESS_DENIED'],
      // Access levels: up to one's own in each domain.
      [
        'admin grants integrations admin',
        'admin',
        (as) => setPolicies(as, 'viewer', [{ domain: 'integrations', access_level: 'admin' }]),
        200,
      ],
      [
        'members admin grants notes write',
        'membersAdmin',
        (as) => setPolicies(as, 'viewer', [{ domain: 'notes', access_level: 'write' }]),
        200,
      ],
      [
        'members admin grants integrations admin',
        'membersAdmin',
        (as) => setPolicies(as, 'viewer', [{ domain: 'integrations', access_level: 'admin' }]),
        403,
        'ACCESS_ABOVE_OWN',
      ],
      [
        'members admin grants audit read',
        'membersAdmin',
        (as) => setPolicies(as, 'member', [{ domain: 'audit', access_level: 'read' }]),
        403,
        'ACCESS_ABOVE_OWN',
      ],
      [
        'members admin invites with integrations admin',
        'membersAdmin',
        (as) => invite(as, 'viewer', [{ domain: 'integrations', access_level: 'admin' }]),
        403,
        'ACCESS_ABOVE_OWN',
      ],
      [
        'members admin lowers a member',
        'membersAdmin',
        (as) => setPolicies(as, 'member', [{ domain: 'notes', access_level: 'read' }]),
        200,
      ],
      // Nobody acts on a higher rank: demote, deactivate, re-police, mint keys for.
      ['admin demotes an owner', 'admin', (as) => setRole(as, 'owner', 'member'), 403, 'MEMBER_OUTRANKS_YOU'],
      ['admin deactivates an owner', 'admin', (as) => deactivate(as, 'owner'), 403, 'MEMBER_OUTRANKS_YOU'],
      [
        'admin re-polices an owner',
        'admin',
        (as) => setPolicies(as, 'owner', [{ domain: 'audit', access_level: 'none' }]),
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      ['admin mints a key for an owner', 'admin', (as) => mintKeyFor(as, 'owner'), 403, 'MEMBER_OUTRANKS_YOU'],
      ['admin deactivates an admin', 'admin', (as) => deactivate(as, 'admin'), 200],
      ['owner deactivates an owner', 'owner', (as) => deactivate(as, 'owner'), 200],
      [
        'members admin deactivates an admin',
        'membersAdmin',
        (as) => deactivate(as, 'admin'),
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      [
        'members admin mints a key for an admin',
        'membersAdmin',
        (as) => mintKeyFor(as, 'admin'),
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      ['members admin deactivates a member', 'membersAdmin', (as) => deactivate(as, 'member'), 200],
    );
    // The owner invites owners for the rank cases above (only an owner may).
    const mismatches: string[] = [];
    for (const [what, actor, request, status, reason] of cases) {
      const res = await answer(request(stack.client(actors[actor])));
      if (res.status === 201 && res.body?.code) secrets.push(res.body.code);
      if (res.status === 201 && res.body?.api_key) secrets.push(res.body.api_key);
      const gotReason = res.body?.error?.details?.[0]?.reason;
      if (res.status !== status || (reason && gotReason !== reason))
        mismatches.push(`${what} (${actor}): ${res.status} ${gotReason ?? ''}, expected ${status} ${reason ?? ''}`);
    }
    assert.deepEqual(mismatches, []);
    // The members admin of the issue could not make itself anything more: still a member with its one override.
    const me = await ok(owner.GET('/api/v1/members/{id}', byId(membersAdmin.id)));
    assert.equal(me.role, 'member');
    await fails(
      stack.client(membersAdmin.key).PUT('/api/v1/integration-keys/{provider}', {
        ...provider('escalated'),
        body: { credential: 'escalated-credential' },
      }),
      403,
    );
  });

  it('lets an access policy override the role default both ways', async () => {
    const viewerWithAudit = await newMember('viewer', [{ domain: 'audit', access_level: 'admin' }]);
    await ok(stack.client(viewerWithAudit.key).GET('/api/v1/audit-log'));
    const memberWithoutMembers = await newMember('member', [{ domain: 'members', access_level: 'none' }]);
    const denied = await fails(stack.client(memberWithoutMembers.key).GET('/api/v1/members'), 403);
    assert.equal(denied.body.error.status, 'PERMISSION_DENIED');
  });

  it('revokes an API key and deactivates a member with immediate effect', async () => {
    const created = await ok(
      stack.client(keys.member).POST('/api/v1/api-keys', { body: { name: 'short-lived' } }),
      201,
    );
    secrets.push(created.api_key!);
    assert.equal(created.key_hint, created.api_key!.slice(-4));
    const withCreated = stack.client(created.api_key!);
    await ok(withCreated.GET('/api/v1/members'));
    await ok(stack.client(keys.member).DELETE('/api/v1/api-keys/{id}', byId(created.id)));
    const revoked = await fails(withCreated.GET('/api/v1/members'), 401);
    assert.equal(revoked.headers.get('www-authenticate')?.startsWith('Bearer'), true);
    const victim = await newMember('member');
    await ok(stack.client(victim.key).GET('/api/v1/members'));
    const deact = await ok(owner.DELETE('/api/v1/members/{id}', byId(victim.id)));
    assert.equal(deact.is_active, false);
    await fails(stack.client(victim.key).GET('/api/v1/members'), 401);
  });

  it('runs the OAuth consent flow with PKCE through the gateway and stores the tokens encrypted', async () => {
    const connection = randomUUID();
    const start = await ok(
      owner.POST('/api/v1/oauth/{idp}/authorize', {
        ...viaIdp('fake'),
        body: { connection_id: connection, return_to: 'https://app.example.com/settings' },
      }),
    );
    const authorize = new URL(start.authorize_url);
    assert.equal(authorize.origin, idp.issuer);
    assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(authorize.searchParams.get('state'), start.state);
    assert.ok(authorize.searchParams.get('nonce'));
    assert.ok(new Date(start.expires_at!).getTime() - Date.now() <= 10 * 60_000);
    // Raw: the browser's part. IdP consent redirects to the gateway's callback, which redirects to return_to.
    const consent = await fetch(authorize, { redirect: 'manual' });
    assert.equal(consent.status, 302);
    const callbackUrl = consent.headers.get('location')!;
    assert.ok(callbackUrl.startsWith(`${stack.url}/api/v1/oauth/fake/callback?`));
    const callback = await fetch(callbackUrl, { redirect: 'manual' });
    assert.equal(callback.status, 302);
    const back = new URL(callback.headers.get('location')!);
    assert.equal(back.origin + back.pathname, 'https://app.example.com/settings');
    assert.equal(back.searchParams.get('status'), 'connected');
    assert.equal(back.searchParams.get('connection_id'), connection);
    assert.deepEqual(
      idp.tokenRequests.map((t) => t.verifierOk),
      [true],
    );
    secrets.push(...idp.issued);
    const stored = await ok(owner.GET('/api/v1/integration-keys/{provider}', provider('fake')));
    assert.equal(stored.metadata?.connection_id, connection, JSON.stringify(stored));
    assert.equal(typeof stored.key_hint, 'string');
    // The state is single-use.
    const replay = await fetch(callbackUrl, { redirect: 'manual' });
    assert.equal(replay.status, 400);
  });

  it('stores nothing from an OAuth callback when the key that started the flow was revoked meanwhile', async () => {
    const key = await ok(owner.POST('/api/v1/api-keys', { body: { name: 'oauth starter' } }), 201);
    secrets.push(key.api_key!);
    const connection = randomUUID();
    const start = await ok(
      stack.client(key.api_key!).POST('/api/v1/oauth/{idp}/authorize', {
        ...viaIdp('fake'),
        body: { connection_id: connection, return_to: 'https://app.example.com/settings' },
      }),
    );
    await ok(owner.DELETE('/api/v1/api-keys/{id}', byId(key.id)));
    // Raw: the browser's part, consent and callback.
    const consent = await fetch(start.authorize_url, { redirect: 'manual' });
    const callback = await fetch(consent.headers.get('location')!, { redirect: 'manual' });
    secrets.push(...idp.issued);
    assert.equal(callback.status, 302);
    const back = new URL(callback.headers.get('location')!);
    assert.deepEqual([back.searchParams.get('status'), back.searchParams.get('error')], ['error', 'access_revoked']);
    const stored = await owner.GET('/api/v1/integration-keys/{provider}', provider('fake'));
    assert.notEqual(stored.data?.metadata?.connection_id, connection);
  });

  it('refuses unknown providers (404) and foreign return_to origins (400)', async () => {
    await fails(
      owner.POST('/api/v1/oauth/{idp}/authorize', {
        ...viaIdp('nope'),
        body: { connection_id: randomUUID(), return_to: 'https://app.example.com/x' },
      }),
      404,
      'IDP_NOT_FOUND',
    );
    const open = await fails(
      owner.POST('/api/v1/oauth/{idp}/authorize', {
        ...viaIdp('fake'),
        body: { connection_id: randomUUID(), return_to: 'https://evil.example.net/x' },
      }),
      400,
    );
    assert.equal(
      open.body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest')).field_violations[0]
        .field,
      'return_to',
    );
  });

  it('refuses a return_to with control characters or whitespace (400), and resource filters (400 RESOURCE_FILTER_UNSUPPORTED)', async () => {
    const crlf = await fails(
      owner.POST('/api/v1/oauth/{idp}/authorize', {
        ...viaIdp('fake'),
        body: {
          connection_id: randomUUID(),
          return_to: 'https://app.example.com/x\r\nLocation: https://evil.example.net',
        },
      }),
      400,
    );
    const badRequest = (body: any) =>
      body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest')).field_violations;
    assert.equal(badRequest(crlf.body)[0].field, 'return_to');
    const target = ofMember((await newMember('member')).id);
    const filtered = await fails(
      owner.PUT('/api/v1/members/{member_id}/access-policies', {
        ...target,
        body: { policies: [{ domain: 'notes', access_level: 'read', resource_filter: { tag: 'mine' } }] },
      }),
      400,
      'RESOURCE_FILTER_UNSUPPORTED',
    );
    assert.equal(badRequest(filtered.body)[0].field, 'policies[0].resource_filter');
    const unfiltered = await ok(
      owner.PUT('/api/v1/members/{member_id}/access-policies', {
        ...target,
        body: { policies: [{ domain: 'notes', access_level: 'write', resource_filter: null }] },
      }),
    );
    assert.deepEqual(unfiltered[0]!.resource_filter, {});
  });

  it('never shows a secret again, in a response or in a log line', async () => {
    const page = { params: { query: { limit: 200 } } };
    const views = await Promise.all([
      ok(owner.GET('/api/v1/members', page)),
      ok(owner.GET('/api/v1/invitations', page)),
      ok(owner.GET('/api/v1/api-keys', page)),
      ok(owner.GET('/api/v1/integration-keys')),
      ok(owner.GET('/api/v1/audit-log', page)),
    ]);
    const text = JSON.stringify(views);
    const logText = logs.text();
    assert.ok(secrets.length > 20);
    for (const s of secrets) {
      assert.equal(text.includes(s), false, `a secret ending ${s.slice(-4)} was shown again`);
      assert.equal(logText.includes(s), false, `a secret ending ${s.slice(-4)} reached the logs`);
    }
    assert.equal(logText.includes('idp-client-secret-value'), false);
  });
});
