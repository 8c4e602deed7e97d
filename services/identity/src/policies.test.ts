/**
 * What identity accepts that it would not enforce: resource filters on access policies (refused,
 * and cleared where they were stored before), and OAuth return_to URLs with whitespace or control
 * characters (refused before any redirect is built on them).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { createPool, newId, runMigrations } from '@workauto/db';
import { OUTBOX_MIGRATIONS } from '@workauto/events';
import { testDatabase } from '@workauto/testing';
import { IdentityServiceService as S, MemberRole } from '@workauto/protos/workauto/identity/v1/identity.js';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { failure, startIdentity } from './test-support.js';

const READ = AccessLevel.ACCESS_LEVEL_READ;

describe('resource filters on access policies (not enforced, so not accepted)', () => {
  let identity: Awaited<ReturnType<typeof startIdentity>>;
  let ownerCall: Awaited<ReturnType<typeof identity.asKey>>;
  let memberId: string;

  before(async () => {
    identity = await startIdentity();
    const t = await identity.bootstrap('Filters');
    ownerCall = await identity.asKey(t.api_key);
    const inv = await identity.client.call(
      S.createInvitation,
      { email: 'filtered@filters.test', role: MemberRole.MEMBER_ROLE_MEMBER, access_policies: [] },
      ownerCall,
    );
    memberId = (await identity.client.call(S.claimInvitation, { code: inv.code! })).member!.id;
  });
  after(() => identity.stop());

  const stored = async () =>
    (await identity.client.call(S.listAccessPolicies, { member_id: memberId }, ownerCall)).data.map((p) => [
      p.domain,
      p.access_level,
      p.resource_filter,
    ]);

  it('refuses a non-empty resource_filter on PUT /members/{id}/access-policies with RESOURCE_FILTER_UNSUPPORTED, storing nothing', async () => {
    await identity.client.call(
      S.replaceAccessPolicies,
      { member_id: memberId, policies: [{ domain: 'notes', access_level: READ }] },
      ownerCall,
    );
    const before = await stored();
    const err = await failure(
      identity.client.call(
        S.replaceAccessPolicies,
        {
          member_id: memberId,
          policies: [
            { domain: 'crm', access_level: READ, resource_filter: {} },
            { domain: 'tasks', access_level: READ, resource_filter: { project: 'apollo' } },
          ],
        },
        ownerCall,
      ),
    );
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(err.reason, 'RESOURCE_FILTER_UNSUPPORTED');
    assert.deepEqual(
      err.fieldViolations.map((v) => v.field),
      ['policies[1].resource_filter'],
    );
    assert.match(err.message, /not supported yet/);
    assert.match(err.fieldViolations[0]!.description, /null or \{\}/, 'says what to send instead');
    assert.deepEqual(await stored(), before, 'the policies are unchanged');
  });

  it('accepts null and {} as "no filter", and always shows {}', async () => {
    const set = await identity.client.call(
      S.replaceAccessPolicies,
      {
        member_id: memberId,
        policies: [
          { domain: 'crm', access_level: READ, resource_filter: {} },
          { domain: 'tasks', access_level: READ },
        ],
      },
      ownerCall,
    );
    assert.deepEqual(
      set.data.map((p) => [p.domain, p.resource_filter]),
      [
        ['crm', {}],
        ['tasks', {}],
      ],
    );
  });

  it('refuses a non-empty resource_filter in POST /invitations access_policies', async () => {
    const err = await failure(
      identity.client.call(
        S.createInvitation,
        {
          email: 'invited@filters.test',
          role: MemberRole.MEMBER_ROLE_VIEWER,
          access_policies: [{ domain: 'notes', access_level: READ, resource_filter: { tag: ['x'] } }],
        },
        ownerCall,
      ),
    );
    assert.deepEqual(
      [err.code, err.reason, err.fieldViolations.map((v) => v.field)],
      [grpc.status.INVALID_ARGUMENT, 'RESOURCE_FILTER_UNSUPPORTED', ['access_policies[0].resource_filter']],
    );
    const list = await identity.client.call(S.listInvitations, { limit: 200 }, ownerCall);
    assert.equal(
      list.data.some((i) => i.email === 'invited@filters.test'),
      false,
      'no invitation was created',
    );
  });
});

describe('migration 0003: filters stored before they were refused are cleared', () => {
  it('empties the filters stored on policies and invitations', async () => {
    const migrations = fileURLToPath(new URL('../migrations', import.meta.url));
    // The schema as it was before the migration: only the files numbered below 0003.
    const older = mkdtempSync(join(tmpdir(), 'identity-migrations-'));
    for (const name of readdirSync(migrations).filter((n) => n < '0003'))
      cpSync(join(migrations, name), join(older, name));
    const databaseUrl = await testDatabase('identity_filters');
    const pool = createPool(databaseUrl);
    try {
      await runMigrations(pool, [OUTBOX_MIGRATIONS, older]);
      const tenant = newId();
      const member = newId();
      const invitation = newId();
      await pool.query(`INSERT INTO tenants (id, name) VALUES ($1, 'Old')`, [tenant]);
      await pool.query(`INSERT INTO members (id, tenant_id, name, role) VALUES ($1, $2, 'M', 'member')`, [
        member,
        tenant,
      ]);
      await pool.query(
        `INSERT INTO access_policies (tenant_id, member_id, domain, access_level, resource_filter)
         VALUES ($1, $2, 'notes', 'read', '{"tag": "secret"}'), ($1, $2, 'crm', 'write', '{}')`,
        [tenant, member],
      );
      await pool.query(
        `INSERT INTO invitations (id, tenant_id, email, role, access_policies, code_hash, expires_at)
         VALUES ($1, $2, 'x@old.test', 'viewer', $3, 'hash', now() + interval '1 day')`,
        [
          invitation,
          tenant,
          JSON.stringify([
            { domain: 'notes', access_level: 'read', resource_filter: { tag: 'secret' } },
            { domain: 'crm', access_level: 'none', resource_filter: {} },
          ]),
        ],
      );
      await runMigrations(pool, [OUTBOX_MIGRATIONS, migrations]);
      const policies = await pool.query('SELECT domain, access_level, resource_filter FROM access_policies ORDER BY 1');
      assert.deepEqual(policies.rows, [
        { domain: 'crm', access_level: 'write', resource_filter: {} },
        { domain: 'notes', access_level: 'read', resource_filter: {} },
      ]);
      const inv = await pool.query('SELECT access_policies FROM invitations WHERE id = $1', [invitation]);
      assert.deepEqual(inv.rows[0].access_policies, [
        { domain: 'notes', access_level: 'read' },
        { domain: 'crm', access_level: 'none' },
      ]);
    } finally {
      await pool.end();
    }
  });
});

describe('OAuth return_to and providers that fail', () => {
  let identity: Awaited<ReturnType<typeof startIdentity>>;
  let ownerCall: Awaited<ReturnType<typeof identity.asKey>>;
  // An issuer whose server answers, but has no discovery document (a wrong issuer URL in OAUTH_PROVIDERS).
  const wrongIssuer = createServer((_req, res) => res.writeHead(404).end('not found'));

  before(async () => {
    await new Promise<void>((resolve) => wrongIssuer.listen(0, '127.0.0.1', resolve));
    const port = (wrongIssuer.address() as AddressInfo).port;
    identity = await startIdentity({
      oauth: {
        providers: {
          // Nothing listens on port 9: an outage.
          fake: { issuer: 'http://127.0.0.1:9/', client_id: 'c', client_secret: 's', scopes: ['openid'] },
          misconfigured: {
            issuer: `http://127.0.0.1:${port}/`,
            client_id: 'c',
            client_secret: 's',
            scopes: ['openid'],
          },
        },
        redirectBaseUrl: 'http://127.0.0.1:8080',
        allowedReturnOrigins: ['https://app.example.com'],
      },
    });
    ownerCall = await identity.asKey((await identity.bootstrap('Returns')).api_key);
  });
  after(async () => {
    await identity.stop();
    wrongIssuer.close();
  });

  const authorize = (idp: string) =>
    failure(
      identity.client.call(
        S.startOAuthAuthorization,
        { idp, connection_id: newId(), return_to: 'https://app.example.com/done' },
        ownerCall,
      ),
    );

  it('answers 503 IDP_UNAVAILABLE (retry later) only when the provider cannot be reached', async () => {
    const err = await authorize('fake');
    assert.deepEqual([err.code, err.reason], [grpc.status.UNAVAILABLE, 'IDP_UNAVAILABLE']);
  });

  it('answers a provider whose discovery fails for good with IDP_MISCONFIGURED, not a 503 that no retry fixes', async () => {
    const err = await authorize('misconfigured');
    assert.deepEqual([err.code, err.reason], [grpc.status.INTERNAL, 'IDP_MISCONFIGURED']);
    assert.match(err.message, /OAUTH_PROVIDERS/);
    assert.doesNotMatch(err.message, /retry/);
  });

  for (const [what, returnTo] of [
    ['a newline', 'https://app.example.com/done\r\nSet-Cookie: a=b'],
    ['a tab', 'https://app.example.com/do\tne'],
    ['a space', 'https://app.example.com/my page'],
    ['a leading space', ' https://app.example.com/done'],
    ['a NUL', 'https://app.example.com/done\u0000'],
  ] as const) {
    it(`refuses a return_to with ${what} (400 naming return_to), though the URL parser would accept it`, async () => {
      assert.equal(new URL(returnTo).origin, 'https://app.example.com', 'the WHATWG parser strips or encodes it');
      const err = await failure(
        identity.client.call(
          S.startOAuthAuthorization,
          { idp: 'fake', connection_id: newId(), return_to: returnTo },
          ownerCall,
        ),
      );
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
      assert.deepEqual(
        err.fieldViolations.map((v) => v.field),
        ['return_to'],
      );
      assert.match(err.fieldViolations[0]!.description, /whitespace or control characters/);
    });
  }
});
