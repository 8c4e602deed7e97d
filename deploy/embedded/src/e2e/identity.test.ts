import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { captureLogs, freePort } from '@workauto/testing';
import { startTestStack, type TestStack, type TenantFixture } from './harness.js';
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
  async function newMember(role: Role, policies: { domain: string; access_level: string }[] = []) {
    const inv = await stack.api('POST', '/api/v1/invitations', {
      key: tenant.key,
      body: { email: `${role}-${randomUUID()}@matrix.test`, role, access_policies: policies },
    });
    assert.equal(inv.status, 201, JSON.stringify(inv.body));
    secrets.push(inv.body.code);
    const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
    secrets.push(claimed.body.api_key);
    return { id: claimed.body.member.id as string, key: claimed.body.api_key as string };
  }

  it('claims an invitation into a member, its policies and a working key', async () => {
    const inv = await stack.api('POST', '/api/v1/invitations', {
      key: tenant.key,
      body: {
        email: 'new@matrix.test',
        name: 'New Person',
        role: 'member',
        access_policies: [{ domain: 'audit', access_level: 'read' }],
      },
    });
    assert.equal(inv.status, 201);
    assert.equal(inv.body.status, 'pending');
    secrets.push(inv.body.code);
    const listed = await stack.api('GET', '/api/v1/invitations', { key: tenant.key });
    assert.equal(JSON.stringify(listed.body).includes(inv.body.code), false, 'codes are never listed');
    const claim = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    assert.equal(claim.status, 200);
    secrets.push(claim.body.api_key);
    assert.equal(claim.body.member.name, 'New Person');
    assert.equal(claim.body.member.role, 'member');
    assert.equal(claim.body.member.is_active, true);
    assert.deepEqual(
      claim.body.access_policies.map((p: { domain: string; access_level: string }) => [p.domain, p.access_level]),
      [['audit', 'read']],
    );
    const me = await stack.api('GET', `/api/v1/members/${claim.body.member.id}`, { key: claim.body.api_key });
    assert.equal(me.status, 200);
    const again = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.details[0].reason, 'INVITATION_ALREADY_CLAIMED');
    const unknown = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: 'inv_nope' } });
    assert.equal(unknown.status, 404);
  });

  it('yields exactly one member from 20 parallel claims of one code', async () => {
    const inv = await stack.api('POST', '/api/v1/invitations', {
      key: tenant.key,
      body: { email: 'race@matrix.test', role: 'viewer' },
    });
    secrets.push(inv.body.code);
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, ...Array(19).fill(409)]);
    for (const r of results) if (r.status === 200) secrets.push(r.body.api_key);
    const all = await stack.api('GET', '/api/v1/members?limit=200', { key: tenant.key });
    assert.equal(all.body.data.filter((m: { email?: string }) => m.email === 'race@matrix.test').length, 1);
  });

  it('answers every identity endpoint with 2xx or 403 per role, as docs/api.md §3 says', async () => {
    await stack.api('PUT', '/api/v1/integration-keys/matrix', {
      key: tenant.key,
      body: { credential: 'matrix-credential-0001' },
    });
    secrets.push('matrix-credential-0001');
    const ensureKey = () =>
      stack.api('PUT', '/api/v1/integration-keys/matrix', {
        key: tenant.key,
        body: { credential: 'matrix-credential-0001' },
      });
    const freshInvitation = async () => {
      const r = await stack.api('POST', '/api/v1/invitations', {
        key: tenant.key,
        body: { email: `t-${randomUUID()}@matrix.test`, role: 'viewer' },
      });
      secrets.push(r.body.code);
      return r.body.id as string;
    };
    // Each endpoint: how to call it as a role (fresh targets for destructive calls), and whether it needs admin.
    type Call = { name: string; admin: boolean; run: (role: Role) => Promise<number> };
    const call = (method: string, path: string, body?: unknown) => (role: Role) =>
      stack.api(method, path, { key: keys[role], body }).then((r) => r.status);
    const calls: Call[] = [
      { name: 'GET /members', admin: false, run: call('GET', '/api/v1/members') },
      { name: 'GET /members/{id}', admin: false, run: (r) => call('GET', `/api/v1/members/${ids.owner}`)(r) },
      {
        name: 'PATCH /members/{id}',
        admin: true,
        run: async (r) => call('PATCH', `/api/v1/members/${(await newMember('viewer')).id}`, { name: 'Renamed' })(r),
      },
      {
        name: 'DELETE /members/{id}',
        admin: true,
        run: async (r) => call('DELETE', `/api/v1/members/${(await newMember('viewer')).id}`)(r),
      },
      {
        name: 'GET /members/{id}/access-policies',
        admin: false,
        run: (r) => call('GET', `/api/v1/members/${ids.viewer}/access-policies`)(r),
      },
      {
        name: 'PUT /members/{id}/access-policies',
        admin: true,
        run: async (r) =>
          call('PUT', `/api/v1/members/${(await newMember('viewer')).id}/access-policies`, { policies: [] })(r),
      },
      {
        name: 'POST /invitations',
        admin: true,
        run: call('POST', '/api/v1/invitations', { email: 'x@matrix.test', role: 'viewer' }),
      },
      { name: 'GET /invitations', admin: true, run: call('GET', '/api/v1/invitations') },
      {
        name: 'DELETE /invitations/{id}',
        admin: true,
        run: async (r) => call('DELETE', `/api/v1/invitations/${await freshInvitation()}`)(r),
      },
      { name: 'GET /api-keys', admin: false, run: call('GET', '/api/v1/api-keys') },
      { name: 'POST /api-keys', admin: false, run: call('POST', '/api/v1/api-keys', { name: 'matrix' }) },
      {
        name: 'DELETE /api-keys/{own id}',
        admin: false,
        run: async (r) => {
          const created = await stack.api('POST', '/api/v1/api-keys', { key: keys[r], body: { name: 'to revoke' } });
          secrets.push(created.body.api_key);
          return call('DELETE', `/api/v1/api-keys/${created.body.id}`)(r);
        },
      },
      { name: 'GET /integration-keys', admin: true, run: call('GET', '/api/v1/integration-keys') },
      {
        name: 'GET /integration-keys/{provider}',
        admin: true,
        run: async (r) => (await ensureKey(), call('GET', '/api/v1/integration-keys/matrix')(r)),
      },
      {
        name: 'PUT /integration-keys/{provider}',
        admin: true,
        run: call('PUT', '/api/v1/integration-keys/matrix', { credential: 'matrix-credential-0001' }),
      },
      {
        name: 'DELETE /integration-keys/{provider}',
        admin: true,
        run: async (r) => (await ensureKey(), call('DELETE', '/api/v1/integration-keys/matrix')(r)),
      },
      {
        name: 'POST /oauth/{idp}/authorize',
        admin: true,
        run: call('POST', '/api/v1/oauth/fake/authorize', {
          connection_id: randomUUID(),
          return_to: 'https://app.example.com/done',
        }),
      },
      { name: 'GET /audit-log', admin: true, run: call('GET', '/api/v1/audit-log') },
    ];
    const table: string[] = [];
    const mismatches: string[] = [];
    for (const c of calls) {
      const row: string[] = [];
      for (const role of ['owner', 'admin', 'member', 'viewer'] as const) {
        const status = await c.run(role);
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
    // [what, actor, request, expected status, expected reason]; targets are made fresh where the call changes them.
    type Case = [string, Actor, () => Promise<[string, string, unknown?]>, number, string?];
    const cases: Case[] = [];
    for (const actor of ['owner', 'admin', 'member', 'viewer', 'membersAdmin'] as const) {
      const ownReason = actor === 'member' || actor === 'viewer' ? 'ACCESS_DENIED' : 'OWN_ACCESS_CHANGE'; // the gateway stops those without members admin first
      cases.push(
        [
          'own role up',
          actor,
          async () => ['PATCH', `/api/v1/members/${self[actor]}`, { role: actor === 'owner' ? 'admin' : 'owner' }],
          403,
          ownReason,
        ],
        [
          'own policies',
          actor,
          async () => [
            'PUT',
            `/api/v1/members/${self[actor]}/access-policies`,
            { policies: [{ domain: 'integrations', access_level: 'admin' }] },
          ],
          403,
          ownReason,
        ],
      );
    }
    cases.push(
      // Roles: up to one's own, never above.
      [
        'owner makes an owner',
        'owner',
        async () => ['PATCH', `/api/v1/members/${await fresh('viewer')}`, { role: 'owner' }],
        200,
      ],
      [
        'admin makes an admin',
        'admin',
        async () => ['PATCH', `/api/v1/members/${await fresh('viewer')}`, { role: 'admin' }],
        200,
      ],
      [
        'admin makes an owner',
        'admin',
        async () => ['PATCH', `/api/v1/members/${await fresh('viewer')}`, { role: 'owner' }],
        403,
        'ROLE_ABOVE_OWN',
      ],
      [
        'admin invites an owner',
        'admin',
        async () => ['POST', '/api/v1/invitations', { email: email(), role: 'owner' }],
        403,
        'ROLE_ABOVE_OWN',
      ],
      [
        'admin invites an admin',
        'admin',
        async () => ['POST', '/api/v1/invitations', { email: email(), role: 'admin' }],
        201,
      ],
      [
        'members admin makes a member',
        'membersAdmin',
        async () => ['PATCH', `/api/v1/members/${await fresh('viewer')}`, { role: 'member' }],
        200,
      ],
      [
        'members admin makes an admin',
        'membersAdmin',
        async () => ['PATCH', `/api/v1/members/${await fresh('viewer')}`, { role: 'admin' }],
        403,
        'ROLE_ABOVE_OWN',
      ],
      [
        'members admin invites an admin',
        'membersAdmin',
        async () => ['POST', '/api/v1/invitations', { email: email(), role: 'admin' }],
        403,
        'ROLE_ABOVE_OWN',
      ],
      [
        'member invites a viewer',
        'member',
        async () => ['POST', '/api/v1/invitations', { email: email(), role: 'viewer' }],
        403,
        'ACCESS_DENIED',
      ],
      [
        'viewer makes a member',
        'viewer',
        async () => ['PATCH', `/api/v1/members/${await fresh('viewer')}`, { role: 'member' }],
        403,
        'ACCESS_DENIED',
      ],
      // Access levels: up to one's own in each domain.
      [
        'admin grants integrations admin',
        'admin',
        async () => [
          'PUT',
          `/api/v1/members/${await fresh('viewer')}/access-policies`,
          { policies: [{ domain: 'integrations', access_level: 'admin' }] },
        ],
        200,
      ],
      [
        'members admin grants notes write',
        'membersAdmin',
        async () => [
          'PUT',
          `/api/v1/members/${await fresh('viewer')}/access-policies`,
          { policies: [{ domain: 'notes', access_level: 'write' }] },
        ],
        200,
      ],
      [
        'members admin grants integrations admin',
        'membersAdmin',
        async () => [
          'PUT',
          `/api/v1/members/${await fresh('viewer')}/access-policies`,
          { policies: [{ domain: 'integrations', access_level: 'admin' }] },
        ],
        403,
        'ACCESS_ABOVE_OWN',
      ],
      [
        'members admin grants audit read',
        'membersAdmin',
        async () => [
          'PUT',
          `/api/v1/members/${await fresh('member')}/access-policies`,
          { policies: [{ domain: 'audit', access_level: 'read' }] },
        ],
        403,
        'ACCESS_ABOVE_OWN',
      ],
      [
        'members admin invites with integrations admin',
        'membersAdmin',
        async () => [
          'POST',
          '/api/v1/invitations',
          { email: email(), role: 'viewer', access_policies: [{ domain: 'integrations', access_level: 'admin' }] },
        ],
        403,
        'ACCESS_ABOVE_OWN',
      ],
      [
        'members admin lowers a member',
        'membersAdmin',
        async () => [
          'PUT',
          `/api/v1/members/${await fresh('member')}/access-policies`,
          { policies: [{ domain: 'notes', access_level: 'read' }] },
        ],
        200,
      ],
      // Nobody acts on a higher rank: demote, deactivate, re-police, mint keys for.
      [
        'admin demotes an owner',
        'admin',
        async () => ['PATCH', `/api/v1/members/${await fresh('owner')}`, { role: 'member' }],
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      [
        'admin deactivates an owner',
        'admin',
        async () => ['DELETE', `/api/v1/members/${await fresh('owner')}`],
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      [
        'admin re-polices an owner',
        'admin',
        async () => [
          'PUT',
          `/api/v1/members/${await fresh('owner')}/access-policies`,
          { policies: [{ domain: 'audit', access_level: 'none' }] },
        ],
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      [
        'admin mints a key for an owner',
        'admin',
        async () => ['POST', '/api/v1/api-keys', { name: 'mine now', member_id: await fresh('owner') }],
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      ['admin deactivates an admin', 'admin', async () => ['DELETE', `/api/v1/members/${await fresh('admin')}`], 200],
      ['owner deactivates an owner', 'owner', async () => ['DELETE', `/api/v1/members/${await fresh('owner')}`], 200],
      [
        'members admin deactivates an admin',
        'membersAdmin',
        async () => ['DELETE', `/api/v1/members/${await fresh('admin')}`],
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      [
        'members admin mints a key for an admin',
        'membersAdmin',
        async () => ['POST', '/api/v1/api-keys', { name: 'mine now', member_id: await fresh('admin') }],
        403,
        'MEMBER_OUTRANKS_YOU',
      ],
      [
        'members admin deactivates a member',
        'membersAdmin',
        async () => ['DELETE', `/api/v1/members/${await fresh('member')}`],
        200,
      ],
    );
    // The owner invites owners for the rank cases above (only an owner may).
    const mismatches: string[] = [];
    for (const [what, actor, request, status, reason] of cases) {
      const [method, path, body] = await request();
      const res = await stack.api(method, path, { key: actors[actor], body });
      if (res.status === 201 && res.body?.code) secrets.push(res.body.code);
      if (res.status === 201 && res.body?.api_key) secrets.push(res.body.api_key);
      const gotReason = res.body?.error?.details?.[0]?.reason;
      if (res.status !== status || (reason && gotReason !== reason))
        mismatches.push(`${what} (${actor}): ${res.status} ${gotReason ?? ''}, expected ${status} ${reason ?? ''}`);
    }
    assert.deepEqual(mismatches, []);
    // The members admin of the issue could not make itself anything more: still a member with its one override.
    const me = await stack.api('GET', `/api/v1/members/${membersAdmin.id}`, { key: tenant.key });
    assert.equal(me.body.role, 'member');
    assert.equal(
      (
        await stack.api('PUT', '/api/v1/integration-keys/escalated', {
          key: membersAdmin.key,
          body: { credential: 'escalated-credential' },
        })
      ).status,
      403,
    );
  });

  it('lets an access policy override the role default both ways', async () => {
    const viewerWithAudit = await newMember('viewer', [{ domain: 'audit', access_level: 'admin' }]);
    assert.equal((await stack.api('GET', '/api/v1/audit-log', { key: viewerWithAudit.key })).status, 200);
    const memberWithoutMembers = await newMember('member', [{ domain: 'members', access_level: 'none' }]);
    const denied = await stack.api('GET', '/api/v1/members', { key: memberWithoutMembers.key });
    assert.equal(denied.status, 403);
    assert.equal(denied.body.error.status, 'PERMISSION_DENIED');
  });

  it('revokes an API key and deactivates a member with immediate effect', async () => {
    const created = await stack.api('POST', '/api/v1/api-keys', { key: keys.member, body: { name: 'short-lived' } });
    assert.equal(created.status, 201);
    secrets.push(created.body.api_key);
    assert.equal(created.body.key_hint, created.body.api_key.slice(-4));
    assert.equal((await stack.api('GET', '/api/v1/members', { key: created.body.api_key })).status, 200);
    assert.equal((await stack.api('DELETE', `/api/v1/api-keys/${created.body.id}`, { key: keys.member })).status, 200);
    const revoked = await stack.api('GET', '/api/v1/members', { key: created.body.api_key });
    assert.equal(revoked.status, 401);
    assert.equal(revoked.headers.get('www-authenticate')?.startsWith('Bearer'), true);
    const victim = await newMember('member');
    assert.equal((await stack.api('GET', '/api/v1/members', { key: victim.key })).status, 200);
    const deact = await stack.api('DELETE', `/api/v1/members/${victim.id}`, { key: tenant.key });
    assert.equal(deact.body.is_active, false);
    assert.equal((await stack.api('GET', '/api/v1/members', { key: victim.key })).status, 401);
  });

  it('runs the OAuth consent flow with PKCE through the gateway and stores the tokens encrypted', async () => {
    const connection = randomUUID();
    const start = await stack.api('POST', '/api/v1/oauth/fake/authorize', {
      key: tenant.key,
      body: { connection_id: connection, return_to: 'https://app.example.com/settings' },
    });
    assert.equal(start.status, 200, JSON.stringify(start.body));
    const authorize = new URL(start.body.authorize_url);
    assert.equal(authorize.origin, idp.issuer);
    assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(authorize.searchParams.get('state'), start.body.state);
    assert.ok(authorize.searchParams.get('nonce'));
    assert.ok(new Date(start.body.expires_at).getTime() - Date.now() <= 10 * 60_000);
    // The browser: IdP consent redirects to the gateway's callback, which redirects to return_to.
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
    const stored = await stack.api('GET', '/api/v1/integration-keys/fake', { key: tenant.key });
    assert.equal(stored.status, 200);
    assert.equal(stored.body.metadata.connection_id, connection, JSON.stringify(stored.body));
    assert.equal(typeof stored.body.key_hint, 'string');
    // The state is single-use.
    const replay = await fetch(callbackUrl, { redirect: 'manual' });
    assert.equal(replay.status, 400);
  });

  it('stores nothing from an OAuth callback when the key that started the flow was revoked meanwhile', async () => {
    const key = await stack.api('POST', '/api/v1/api-keys', { key: tenant.key, body: { name: 'oauth starter' } });
    secrets.push(key.body.api_key);
    const connection = randomUUID();
    const start = await stack.api('POST', '/api/v1/oauth/fake/authorize', {
      key: key.body.api_key,
      body: { connection_id: connection, return_to: 'https://app.example.com/settings' },
    });
    assert.equal(start.status, 200, JSON.stringify(start.body));
    assert.equal((await stack.api('DELETE', `/api/v1/api-keys/${key.body.id}`, { key: tenant.key })).status, 200);
    const consent = await fetch(start.body.authorize_url, { redirect: 'manual' });
    const callback = await fetch(consent.headers.get('location')!, { redirect: 'manual' });
    secrets.push(...idp.issued);
    assert.equal(callback.status, 302);
    const back = new URL(callback.headers.get('location')!);
    assert.deepEqual([back.searchParams.get('status'), back.searchParams.get('error')], ['error', 'access_revoked']);
    const stored = await stack.api('GET', '/api/v1/integration-keys/fake', { key: tenant.key });
    assert.notEqual(stored.body?.metadata?.connection_id, connection);
  });

  it('refuses unknown providers (404) and foreign return_to origins (400)', async () => {
    const unknown = await stack.api('POST', '/api/v1/oauth/nope/authorize', {
      key: tenant.key,
      body: { connection_id: randomUUID(), return_to: 'https://app.example.com/x' },
    });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.details[0].reason, 'IDP_NOT_FOUND');
    const open = await stack.api('POST', '/api/v1/oauth/fake/authorize', {
      key: tenant.key,
      body: { connection_id: randomUUID(), return_to: 'https://evil.example.net/x' },
    });
    assert.equal(open.status, 400);
    assert.equal(
      open.body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest')).field_violations[0]
        .field,
      'return_to',
    );
  });

  it('refuses a return_to with control characters or whitespace (400), and resource filters (400 RESOURCE_FILTER_UNSUPPORTED)', async () => {
    const crlf = await stack.api('POST', '/api/v1/oauth/fake/authorize', {
      key: tenant.key,
      body: {
        connection_id: randomUUID(),
        return_to: 'https://app.example.com/x\r\nLocation: https://evil.example.net',
      },
    });
    assert.equal(crlf.status, 400, JSON.stringify(crlf.body));
    const badRequest = (body: any) =>
      body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest')).field_violations;
    assert.equal(badRequest(crlf.body)[0].field, 'return_to');
    const target = (await newMember('member')).id;
    const filtered = await stack.api('PUT', `/api/v1/members/${target}/access-policies`, {
      key: tenant.key,
      body: { policies: [{ domain: 'notes', access_level: 'read', resource_filter: { tag: 'mine' } }] },
    });
    assert.equal(filtered.status, 400, JSON.stringify(filtered.body));
    assert.equal(filtered.body.error.details[0].reason, 'RESOURCE_FILTER_UNSUPPORTED');
    assert.equal(badRequest(filtered.body)[0].field, 'policies[0].resource_filter');
    const unfiltered = await stack.api('PUT', `/api/v1/members/${target}/access-policies`, {
      key: tenant.key,
      body: { policies: [{ domain: 'notes', access_level: 'write', resource_filter: null }] },
    });
    assert.equal(unfiltered.status, 200, JSON.stringify(unfiltered.body));
    assert.deepEqual(unfiltered.body[0].resource_filter, {});
  });

  it('never shows a secret again, in a response or in a log line', async () => {
    const views = await Promise.all(
      [
        '/api/v1/members?limit=200',
        '/api/v1/invitations?limit=200',
        '/api/v1/api-keys?limit=200',
        '/api/v1/integration-keys',
        '/api/v1/audit-log?limit=200',
      ].map((p) => stack.api('GET', p, { key: tenant.key })),
    );
    const text = JSON.stringify(views.map((v) => v.body));
    const logText = logs.text();
    assert.ok(secrets.length > 20);
    for (const s of secrets) {
      assert.equal(text.includes(s), false, `a secret ending ${s.slice(-4)} was shown again`);
      assert.equal(logText.includes(s), false, `a secret ending ${s.slice(-4)} reached the logs`);
    }
    assert.equal(logText.includes('idp-client-secret-value'), false);
  });
});
