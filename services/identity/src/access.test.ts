import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import {
  IdentityServiceService as S,
  MemberRole,
  InvitationStatus,
  type ClaimInvitationResponse,
  type CreateInvitationRequest,
} from '@workauto/protos/workauto/identity/v1/identity.js';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { NO_ACCESS, effectiveAccess, type Role } from './domain/access.js';
import { assertAccessWithin, assertNotOutranked, assertNotOwn, assertRoleWithin } from './domain/grants.js';
import { failure, startIdentity } from './test-support.js';
import { decodeStatusDetails } from '@workauto/grpc';
import { isProviderOutage } from './oauth.js';
import * as client from 'openid-client';
import { freePort } from '@workauto/testing';

describe('role defaults (docs/api.md §3)', () => {
  it('gives members write on work domains, read on config domains, none on audit', () => {
    const a = effectiveAccess('member', []);
    assert.equal(a.notes, 'write');
    assert.equal(a.agents, 'read');
    assert.equal(a.audit, 'none');
    assert.equal(a.integrations, 'none');
    assert.equal(effectiveAccess('viewer', []).webhooks, 'none');
    assert.equal(effectiveAccess('viewer', [{ domain: 'webhooks', access_level: 'write' }]).webhooks, 'write');
  });
});

describe('provider outages (OAuth)', () => {
  it('tells an unreachable provider from a refusal', async () => {
    const unreachable = await fetch(`http://127.0.0.1:${await freePort()}/token`).catch((err: unknown) => err);
    assert.equal(isProviderOutage(unreachable), true);
    assert.equal(
      isProviderOutage(
        new client.ClientError('unexpected HTTP response status code', { cause: new Response('', { status: 503 }) }),
      ),
      true,
    );
    assert.equal(
      isProviderOutage(
        new client.ClientError('unexpected HTTP response status code', { cause: new Response('', { status: 400 }) }),
      ),
      false,
    );
    assert.equal(isProviderOutage(Object.assign(new Error('invalid_grant'), { error: 'invalid_grant' })), false);
  });
});

describe('grant rules (docs/api.md §3)', () => {
  const grantor = (role: Role, overrides: { domain: string; access_level: string }[] = []) => ({
    id: 'me',
    role,
    access: effectiveAccess(role, overrides),
  });
  const reason = (fn: () => void) => {
    try {
      fn();
    } catch (err) {
      return (err as { reason: string }).reason;
    }
    return 'allowed';
  };

  it("refuses own changes, roles above one's own and acting on a higher rank", () => {
    assert.equal(
      reason(() => assertNotOwn(grantor('owner'), 'me', 'role')),
      'OWN_ACCESS_CHANGE',
    );
    assert.equal(
      reason(() => assertNotOwn(grantor('owner'), 'other', 'role')),
      'allowed',
    );
    assert.equal(
      reason(() => assertRoleWithin(grantor('admin'), 'owner')),
      'ROLE_ABOVE_OWN',
    );
    assert.equal(
      reason(() => assertRoleWithin(grantor('admin'), 'admin')),
      'allowed',
    );
    assert.equal(
      reason(() => assertNotOutranked(grantor('admin'), { role: 'owner' }, 'deactivate the membership')),
      'MEMBER_OUTRANKS_YOU',
    );
    assert.equal(
      reason(() => assertNotOutranked(grantor('owner'), { role: 'owner' }, 'deactivate the membership')),
      'allowed',
    );
  });

  it("counts only raises above the grantor's own level", () => {
    const membersAdmin = grantor('member', [{ domain: 'members', access_level: 'admin' }]);
    const viewer = effectiveAccess('viewer', []);
    assert.equal(
      reason(() =>
        assertAccessWithin(
          membersAdmin,
          viewer,
          effectiveAccess('viewer', [{ domain: 'notes', access_level: 'write' }]),
        ),
      ),
      'allowed',
    );
    assert.equal(
      reason(() =>
        assertAccessWithin(
          membersAdmin,
          viewer,
          effectiveAccess('viewer', [{ domain: 'audit', access_level: 'read' }]),
        ),
      ),
      'ACCESS_ABOVE_OWN',
    );
    // A level above the grantor's that was already there is no grant: re-saving it is allowed.
    const granted = effectiveAccess('viewer', [{ domain: 'audit', access_level: 'admin' }]);
    assert.equal(
      reason(() => assertAccessWithin(membersAdmin, granted, granted)),
      'allowed',
    );
    assert.equal(
      reason(() => assertAccessWithin(membersAdmin, NO_ACCESS, effectiveAccess('admin', []))),
      'ACCESS_ABOVE_OWN',
    );
  });
});

describe('invitations, API keys, policies and integration keys over gRPC', () => {
  let identity: Awaited<ReturnType<typeof startIdentity>>;
  let owner: { tenant: string; member: string; key: string };
  let ownerCall: Awaited<ReturnType<typeof identity.asKey>>;
  const ctx = () => ownerCall;

  before(async () => {
    identity = await startIdentity();
    const t = await identity.bootstrap('Invites');
    owner = { tenant: t.tenant!.id, member: t.member!.id, key: t.api_key };
    ownerCall = await identity.asKey(t.api_key);
  });
  after(() => identity.stop());

  const invite = (email: string, extra: Partial<CreateInvitationRequest> = {}) =>
    identity.client.call(
      S.createInvitation,
      { email, role: MemberRole.MEMBER_ROLE_MEMBER, access_policies: [], ...extra },
      ctx(),
    );

  it('shows the code once, stores its hash, and lists invitations without codes', async () => {
    const inv = await invite('a@invites.test');
    assert.match(inv.code!, /^inv_[0-9A-Za-z]{32}$/);
    assert.equal(inv.status, InvitationStatus.INVITATION_STATUS_PENDING);
    const hours = (inv.expires_at!.getTime() - inv.created_at!.getTime()) / 3_600_000;
    assert.ok(Math.abs(hours - 168) < 0.01, `default expiry is 168 h, got ${hours}`);
    const list = await identity.client.call(S.listInvitations, {}, ctx());
    assert.ok(list.data.some((i) => i.id === inv.id));
    assert.ok(list.data.every((i) => i.code === undefined));
    const db = new pg.Client(identity.databaseUrl);
    await db.connect();
    const dump = JSON.stringify((await db.query('SELECT * FROM invitations')).rows);
    await db.end();
    assert.equal(dump.includes(inv.code!), false);
  });

  it('claims exactly once under 20 concurrent claims: one member, the rest 409', async () => {
    const inv = await invite('race@invites.test', {
      access_policies: [{ domain: 'audit', access_level: AccessLevel.ACCESS_LEVEL_READ }],
    });
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () => identity.client.call(S.claimInvitation, { code: inv.code! })),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    assert.equal(ok.length, 1);
    // The losers: claimed already, or refused while the winner's claim was still completing (both 409).
    for (const r of results.filter((r) => r.status === 'rejected')) {
      const { code, reason } = decodeStatusDetails(r.reason as grpc.ServiceError);
      assert.ok(
        (code === grpc.status.FAILED_PRECONDITION && reason === 'INVITATION_ALREADY_CLAIMED') ||
          (code === grpc.status.ABORTED && reason === 'INVITATION_CLAIM_IN_PROGRESS'),
        `a losing claim answered ${grpc.status[code]} ${reason}`,
      );
    }
    const claimed = (ok[0] as PromiseFulfilledResult<ClaimInvitationResponse>).value;
    assert.equal(claimed.access_policies[0]!.domain, 'audit');
    const members = await identity.client.call(S.listMembers, { limit: 200 }, ctx());
    assert.equal(members.data.filter((m) => m.email === 'race@invites.test').length, 1);
    // The claimed key works and carries the policy override.
    const principal = await identity.client.call(S.authenticateToken, { token: claimed.api_key });
    assert.equal(principal.access.audit, AccessLevel.ACCESS_LEVEL_READ);
    assert.equal(principal.access.notes, AccessLevel.ACCESS_LEVEL_WRITE);
  });

  it('answers unknown 404, revoked 410, expired 410, claimed 409', async () => {
    assert.equal(
      (await failure(identity.client.call(S.claimInvitation, { code: 'inv_unknown' }))).code,
      grpc.status.NOT_FOUND,
    );
    const revoked = await invite('revoked@invites.test');
    await identity.client.call(S.revokeInvitation, { id: revoked.id }, ctx());
    const r = await failure(identity.client.call(S.claimInvitation, { code: revoked.code! }));
    assert.deepEqual([r.reason, r.httpStatus], ['INVITATION_REVOKED', 410]);
    const expired = await invite('expired@invites.test', { expires_in_hours: 1 });
    const db = new pg.Client(identity.databaseUrl);
    await db.connect();
    await db.query(`UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
    await db.end();
    const e = await failure(identity.client.call(S.claimInvitation, { code: expired.code! }));
    assert.deepEqual([e.reason, e.httpStatus], ['INVITATION_EXPIRED', 410]);
    const once = await invite('once@invites.test');
    await identity.client.call(S.claimInvitation, { code: once.code! });
    const c = await failure(identity.client.call(S.claimInvitation, { code: once.code! }));
    assert.deepEqual([c.reason, c.httpStatus], ['INVITATION_ALREADY_CLAIMED', 409]);
  });

  it('answers a claim of a code another claim is completing with 409 at once, holding no connection meanwhile', async () => {
    const inv = await invite('held@invites.test');
    // A claim in progress, as long as it takes: the invitation's row lock, held by another session.
    const db = new pg.Client(identity.databaseUrl);
    await db.connect();
    try {
      await db.query('BEGIN');
      await db.query('SELECT 1 FROM invitations WHERE id = $1 FOR UPDATE', [inv.id]);
      // More claims than the service's pool has connections: none may queue behind the lock.
      const claims = await Promise.all(
        Array.from({ length: 12 }, () => failure(identity.client.call(S.claimInvitation, { code: inv.code! }))),
      );
      assert.deepEqual(
        claims.map((c) => [c.code, c.reason]),
        Array(12).fill([grpc.status.ABORTED, 'INVITATION_CLAIM_IN_PROGRESS']),
      );
      assert.match(claims[0]!.message, /retry/);
    } finally {
      await db.query('ROLLBACK');
      await db.end();
    }
    // Once the other claim is gone, the code claims as before.
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    assert.equal(claimed.member!.email, 'held@invites.test');
  });

  it('lets a member manage only its own keys; revoked keys stop at once', async () => {
    const inv = await invite('keys@invites.test');
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const mine = await identity.asKey(claimed.api_key);
    const key = await identity.client.call(S.createApiKey, { name: 'laptop' }, mine);
    assert.match(key.api_key!, /^wk_/);
    assert.equal(key.key_hint, key.api_key!.slice(-4));
    const listed = await identity.client.call(S.listApiKeys, {}, mine);
    assert.equal(listed.data.length, 2);
    assert.ok(listed.data.every((k) => k.api_key === undefined));
    const denied = await failure(identity.client.call(S.listApiKeys, { member_id: owner.member }, mine));
    assert.equal(denied.code, grpc.status.PERMISSION_DENIED);
    const deniedCreate = await failure(
      identity.client.call(S.createApiKey, { name: 'x', member_id: owner.member }, mine),
    );
    assert.equal(deniedCreate.code, grpc.status.PERMISSION_DENIED);
    // The owner (admin on members) may list and revoke the member's keys.
    assert.equal((await identity.client.call(S.listApiKeys, { member_id: claimed.member!.id }, ctx())).data.length, 2);
    await identity.client.call(S.revokeApiKey, { id: key.id }, ctx());
    assert.equal(
      (await failure(identity.client.call(S.authenticateToken, { token: key.api_key! }))).code,
      grpc.status.UNAUTHENTICATED,
    );
    assert.equal(
      (await identity.client.call(S.authenticateToken, { token: claimed.api_key })).member_id,
      claimed.member!.id,
    );
  });

  it('deactivating a member stops all its keys at once', async () => {
    const inv = await invite('gone@invites.test');
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const m = await identity.client.call(S.deactivateMember, { id: claimed.member!.id }, ctx());
    assert.equal(m.is_active, false);
    assert.equal(
      (await failure(identity.client.call(S.authenticateToken, { token: claimed.api_key }))).code,
      grpc.status.UNAUTHENTICATED,
    );
  });

  it('replaces access policies, validating domains and levels', async () => {
    const inv = await invite('policies@invites.test');
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const id = claimed.member!.id;
    const bad = await failure(
      identity.client.call(
        S.replaceAccessPolicies,
        { member_id: id, policies: [{ domain: 'nope', access_level: AccessLevel.ACCESS_LEVEL_READ }] },
        ctx(),
      ),
    );
    assert.equal(bad.fieldViolations[0]?.field, 'policies[0].domain');
    const set = await identity.client.call(
      S.replaceAccessPolicies,
      { member_id: id, policies: [{ domain: 'notes', access_level: AccessLevel.ACCESS_LEVEL_NONE }] },
      ctx(),
    );
    assert.deepEqual(
      set.data.map((p) => [p.domain, p.access_level]),
      [['notes', AccessLevel.ACCESS_LEVEL_NONE]],
    );
    assert.equal(
      (await identity.client.call(S.authenticateToken, { token: claimed.api_key })).access.notes,
      AccessLevel.ACCESS_LEVEL_NONE,
    );
    await identity.client.call(S.replaceAccessPolicies, { member_id: id, policies: [] }, ctx());
    assert.equal(
      (await identity.client.call(S.authenticateToken, { token: claimed.api_key })).access.notes,
      AccessLevel.ACCESS_LEVEL_WRITE,
    );
  });

  it('stores integration credentials encrypted, shows the last 4 only, and bumps key_version on replace', async () => {
    const credential = 'sk-test-0123456789abcdefWXYZ';
    const first = await identity.client.call(
      S.putIntegrationKey,
      { provider: 'openai', credential, label: 'prod' },
      ctx(),
    );
    assert.equal(first.key_hint, 'WXYZ');
    assert.equal(first.metadata?.key_version, 1);
    const again = await identity.client.call(
      S.putIntegrationKey,
      { provider: 'openai', credential: credential + '2' },
      ctx(),
    );
    assert.equal(again.metadata?.key_version, 2);
    assert.equal(again.label, 'prod');
    assert.equal(
      JSON.stringify(await identity.client.call(S.getIntegrationKey, { provider: 'openai' }, ctx())).includes(
        'sk-test',
      ),
      false,
    );
    const db = new pg.Client(identity.databaseUrl);
    await db.connect();
    // escape, not ::text (hex): the event's JSON must be searchable for the credential.
    const dump =
      JSON.stringify((await db.query('SELECT * FROM integration_keys')).rows) +
      JSON.stringify((await db.query(`SELECT encode(payload, 'escape') AS payload FROM outbox`)).rows);
    await db.end();
    assert.equal(dump.includes('sk-test'), false);
    await identity.client.call(S.deleteIntegrationKey, { provider: 'openai' }, ctx());
    assert.equal(
      (await failure(identity.client.call(S.getIntegrationKey, { provider: 'openai' }, ctx()))).code,
      grpc.status.NOT_FOUND,
    );
  });

  it('only an owner makes an owner', async () => {
    const inv = await invite('admin@invites.test', { role: MemberRole.MEMBER_ROLE_ADMIN });
    const admin = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const asAdmin = await identity.asKey(admin.api_key);
    const denied = await failure(
      identity.client.call(
        S.createInvitation,
        { email: 'o2@invites.test', role: MemberRole.MEMBER_ROLE_OWNER, access_policies: [] },
        asAdmin,
      ),
    );
    assert.equal(denied.reason, 'ROLE_ABOVE_OWN');
    const demote = await failure(
      identity.client.call(S.updateMember, { id: owner.member, role: MemberRole.MEMBER_ROLE_MEMBER }, asAdmin),
    );
    assert.equal(demote.reason, 'MEMBER_OUTRANKS_YOU');
    const promoted = await identity.client.call(
      S.updateMember,
      { id: admin.member!.id, role: MemberRole.MEMBER_ROLE_OWNER },
      ctx(),
    );
    assert.equal(promoted.role, MemberRole.MEMBER_ROLE_OWNER);
    // Two owners now: the first may be demoted.
    assert.equal(
      (await identity.client.call(S.updateMember, { id: owner.member, role: MemberRole.MEMBER_ROLE_ADMIN }, asAdmin))
        .role,
      MemberRole.MEMBER_ROLE_ADMIN,
    );
  });

  it('caps a member at 25 active API keys with 409 API_KEY_LIMIT_REACHED; revoking one makes room', async () => {
    const inv = await invite('many-keys@invites.test', { role: MemberRole.MEMBER_ROLE_VIEWER });
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const mine = await identity.asKey(claimed.api_key);
    const created = [];
    for (let i = 1; i < 25; i++) created.push(await identity.client.call(S.createApiKey, { name: `key ${i}` }, mine)); // 1 from the claim
    const over = await failure(identity.client.call(S.createApiKey, { name: 'one too many' }, mine));
    assert.deepEqual(
      [over.code, over.reason, over.httpStatus],
      [grpc.status.FAILED_PRECONDITION, 'API_KEY_LIMIT_REACHED', 409],
    );
    assert.match(over.message, /revoke one/);
    // Nor may an admin add one for it; concurrent creates do not overshoot either.
    assert.equal(
      (await failure(identity.client.call(S.createApiKey, { name: 'by owner', member_id: claimed.member!.id }, ctx())))
        .reason,
      'API_KEY_LIMIT_REACHED',
    );
    await identity.client.call(S.revokeApiKey, { id: created[0]!.id }, mine);
    const raced = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) => identity.client.call(S.createApiKey, { name: `race ${i}` }, mine)),
    );
    assert.equal(raced.filter((r) => r.status === 'fulfilled').length, 1);
    const db = new pg.Client(identity.databaseUrl);
    await db.connect();
    const { rows } = await db.query(
      'SELECT count(*)::int AS n FROM api_keys WHERE member_id = $1 AND revoked_at IS NULL',
      [claimed.member!.id],
    );
    await db.end();
    assert.equal(rows[0].n, 25);
  });

  it("lets a revoked key, or a deactivated member's key, create and change nothing, whatever a cache says", async () => {
    // The calls carry the actor the gateway resolved before the revocation (a replica's cache).
    const inv = await invite('stale@invites.test', { role: MemberRole.MEMBER_ROLE_ADMIN });
    const admin = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const stale = await identity.asKey(admin.api_key);
    const victim = await identity.client.call(S.claimInvitation, { code: (await invite('victim@invites.test')).code! });
    const ownKeys = await identity.client.call(S.listApiKeys, {}, stale);
    await identity.client.call(S.revokeApiKey, { id: ownKeys.data[0]!.id }, ctx());
    const attempts = [
      () => identity.client.call(S.createApiKey, { name: 'escape' }, stale),
      () =>
        identity.client.call(
          S.createInvitation,
          { email: 'friend@invites.test', role: MemberRole.MEMBER_ROLE_ADMIN, access_policies: [] },
          stale,
        ),
      () =>
        identity.client.call(
          S.updateMember,
          { id: victim.member!.id, name: 'renamed', role: MemberRole.MEMBER_ROLE_UNSPECIFIED },
          stale,
        ),
      () => identity.client.call(S.replaceAccessPolicies, { member_id: victim.member!.id, policies: [] }, stale),
      () => identity.client.call(S.putIntegrationKey, { provider: 'stale', credential: 'stale-credential-01' }, stale),
    ];
    for (const attempt of attempts) assert.equal((await failure(attempt())).code, grpc.status.UNAUTHENTICATED);
    // A deactivated member's live key is refused the same way.
    const inv2 = await invite('stale2@invites.test', { role: MemberRole.MEMBER_ROLE_ADMIN });
    const admin2 = await identity.client.call(S.claimInvitation, { code: inv2.code! });
    const stale2 = await identity.asKey(admin2.api_key);
    await identity.client.call(S.deactivateMember, { id: admin2.member!.id }, ctx());
    assert.equal(
      (await failure(identity.client.call(S.createApiKey, { name: 'escape' }, stale2))).code,
      grpc.status.UNAUTHENTICATED,
    );
    assert.equal(
      (
        await failure(
          identity.client.call(
            S.updateMember,
            { id: victim.member!.id, name: 'renamed', role: MemberRole.MEMBER_ROLE_UNSPECIFIED },
            stale2,
          ),
        )
      ).code,
      grpc.status.UNAUTHENTICATED,
    );
    const unchanged = await identity.client.call(S.getMember, { id: victim.member!.id }, ctx());
    assert.notEqual(unchanged.name, 'renamed');
  });

  it("two admins revoking each other's key at once: one wins, the other is refused (401), never a 5xx", async () => {
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) {
      const [a, b] = await Promise.all(
        ['a', 'b'].map(async (who) =>
          identity.client.call(S.claimInvitation, {
            code: (await invite(`mutual-${who}${i}@invites.test`, { role: MemberRole.MEMBER_ROLE_ADMIN })).code!,
          }),
        ),
      );
      const [asA, asB] = await Promise.all([identity.asKey(a!.api_key), identity.asKey(b!.api_key)]);
      const keyOf = async (member: string) =>
        (await identity.client.call(S.listApiKeys, { member_id: member }, ctx())).data[0]!.id;
      const [keyA, keyB] = await Promise.all([keyOf(a!.member!.id), keyOf(b!.member!.id)]);
      const results = await Promise.allSettled([
        identity.client.call(S.revokeApiKey, { id: keyB }, asA),
        identity.client.call(S.revokeApiKey, { id: keyA }, asB),
      ]);
      codes.push(...results.map((r) => (r.status === 'fulfilled' ? 0 : (r.reason as grpc.ServiceError).code)).sort());
    }
    assert.deepEqual(codes, Array.from({ length: 3 }, () => [0, grpc.status.UNAUTHENTICATED]).flat());
  });
});
