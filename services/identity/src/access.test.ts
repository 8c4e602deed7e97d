import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { IdentityServiceService as S, MemberRole, InvitationStatus } from '@workauto/protos/workauto/identity/v1/identity.js';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { effectiveAccess } from './domain/access.js';
import { as, failure, startIdentity } from './test-support.js';

describe('role defaults (contract §4)', () => {
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

describe('invitations, API keys, policies and integration keys over gRPC', () => {
  let identity: Awaited<ReturnType<typeof startIdentity>>;
  let owner: { tenant: string; member: string; key: string };
  const ctx = () => as(owner.tenant, owner.member);

  before(async () => {
    identity = await startIdentity();
    const t = await identity.bootstrap('Invites');
    owner = { tenant: t.tenant!.id, member: t.member!.id, key: t.api_key };
  });
  after(() => identity.stop());

  const invite = (email: string, extra: Partial<Parameters<typeof identity.client.call<any, any>>[1]> = {}) =>
    identity.client.call(S.createInvitation, { email, role: MemberRole.MEMBER_ROLE_MEMBER, access_policies: [], ...extra }, ctx());

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
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => identity.client.call(S.claimInvitation, { code: inv.code! })));
    const ok = results.filter((r) => r.status === 'fulfilled');
    assert.equal(ok.length, 1);
    for (const r of results.filter((r) => r.status === 'rejected')) {
      assert.equal((r.reason as grpc.ServiceError).code, grpc.status.FAILED_PRECONDITION);
    }
    const claimed = (ok[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof identity.client.call<any, any>>>>).value;
    assert.equal(claimed.access_policies[0].domain, 'audit');
    const members = await identity.client.call(S.listMembers, { limit: 200 }, ctx());
    assert.equal(members.data.filter((m) => m.email === 'race@invites.test').length, 1);
    // The claimed key works and carries the policy override.
    const principal = await identity.client.call(S.authenticateToken, { token: claimed.api_key });
    assert.equal(principal.access.audit, AccessLevel.ACCESS_LEVEL_READ);
    assert.equal(principal.access.notes, AccessLevel.ACCESS_LEVEL_WRITE);
  });

  it('answers unknown 404, revoked 410, expired 410, claimed 409', async () => {
    assert.equal((await failure(identity.client.call(S.claimInvitation, { code: 'inv_unknown' }))).code, grpc.status.NOT_FOUND);
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

  it('lets a member manage only its own keys; revoked keys stop at once', async () => {
    const inv = await invite('keys@invites.test');
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const mine = as(owner.tenant, claimed.member!.id);
    const key = await identity.client.call(S.createApiKey, { name: 'laptop' }, mine);
    assert.match(key.api_key!, /^wk_/);
    assert.equal(key.key_hint, key.api_key!.slice(-4));
    const listed = await identity.client.call(S.listApiKeys, {}, mine);
    assert.equal(listed.data.length, 2);
    assert.ok(listed.data.every((k) => k.api_key === undefined));
    const denied = await failure(identity.client.call(S.listApiKeys, { member_id: owner.member }, mine));
    assert.equal(denied.code, grpc.status.PERMISSION_DENIED);
    const deniedCreate = await failure(identity.client.call(S.createApiKey, { name: 'x', member_id: owner.member }, mine));
    assert.equal(deniedCreate.code, grpc.status.PERMISSION_DENIED);
    // The owner (admin on members) may list and revoke the member's keys.
    assert.equal((await identity.client.call(S.listApiKeys, { member_id: claimed.member!.id }, ctx())).data.length, 2);
    await identity.client.call(S.revokeApiKey, { id: key.id }, ctx());
    assert.equal((await failure(identity.client.call(S.authenticateToken, { token: key.api_key! }))).code, grpc.status.UNAUTHENTICATED);
    assert.equal((await identity.client.call(S.authenticateToken, { token: claimed.api_key })).member_id, claimed.member!.id);
  });

  it('deactivating a member stops all its keys at once', async () => {
    const inv = await invite('gone@invites.test');
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const m = await identity.client.call(S.deactivateMember, { id: claimed.member!.id }, ctx());
    assert.equal(m.is_active, false);
    assert.equal((await failure(identity.client.call(S.authenticateToken, { token: claimed.api_key }))).code, grpc.status.UNAUTHENTICATED);
  });

  it('replaces access policies, validating domains and levels', async () => {
    const inv = await invite('policies@invites.test');
    const claimed = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const id = claimed.member!.id;
    const bad = await failure(identity.client.call(S.replaceAccessPolicies, { member_id: id, policies: [{ domain: 'nope', access_level: AccessLevel.ACCESS_LEVEL_READ }] }, ctx()));
    assert.equal(bad.fieldViolations[0]?.field, 'policies[0].domain');
    const set = await identity.client.call(S.replaceAccessPolicies, { member_id: id, policies: [{ domain: 'notes', access_level: AccessLevel.ACCESS_LEVEL_NONE }] }, ctx());
    assert.deepEqual(set.data.map((p) => [p.domain, p.access_level]), [['notes', AccessLevel.ACCESS_LEVEL_NONE]]);
    assert.equal((await identity.client.call(S.authenticateToken, { token: claimed.api_key })).access.notes, AccessLevel.ACCESS_LEVEL_NONE);
    await identity.client.call(S.replaceAccessPolicies, { member_id: id, policies: [] }, ctx());
    assert.equal((await identity.client.call(S.authenticateToken, { token: claimed.api_key })).access.notes, AccessLevel.ACCESS_LEVEL_WRITE);
  });

  it('stores integration credentials encrypted, shows the last 4 only, and bumps key_version on replace', async () => {
    const credential = 'sk-test-0123456789abcdefWXYZ';
    const first = await identity.client.call(S.putIntegrationKey, { provider: 'openai', credential, label: 'prod' }, ctx());
    assert.equal(first.key_hint, 'WXYZ');
    assert.equal(first.metadata?.key_version, 1);
    const again = await identity.client.call(S.putIntegrationKey, { provider: 'openai', credential: credential + '2' }, ctx());
    assert.equal(again.metadata?.key_version, 2);
    assert.equal(again.label, 'prod');
    assert.equal(JSON.stringify(await identity.client.call(S.getIntegrationKey, { provider: 'openai' }, ctx())).includes('sk-test'), false);
    const db = new pg.Client(identity.databaseUrl);
    await db.connect();
    // escape, not ::text (hex): the event's JSON must be searchable for the credential.
    const dump = JSON.stringify((await db.query('SELECT * FROM integration_keys')).rows) + JSON.stringify((await db.query(`SELECT encode(payload, 'escape') AS payload FROM outbox`)).rows);
    await db.end();
    assert.equal(dump.includes('sk-test'), false);
    await identity.client.call(S.deleteIntegrationKey, { provider: 'openai' }, ctx());
    assert.equal((await failure(identity.client.call(S.getIntegrationKey, { provider: 'openai' }, ctx()))).code, grpc.status.NOT_FOUND);
  });

  it('only an owner makes an owner', async () => {
    const inv = await invite('admin@invites.test', { role: MemberRole.MEMBER_ROLE_ADMIN });
    const admin = await identity.client.call(S.claimInvitation, { code: inv.code! });
    const asAdmin = as(owner.tenant, admin.member!.id);
    const denied = await failure(identity.client.call(S.createInvitation, { email: 'o2@invites.test', role: MemberRole.MEMBER_ROLE_OWNER, access_policies: [] }, asAdmin));
    assert.equal(denied.reason, 'OWNER_ROLE_REQUIRED');
    const demote = await failure(identity.client.call(S.updateMember, { id: owner.member, role: MemberRole.MEMBER_ROLE_MEMBER }, asAdmin));
    assert.equal(demote.reason, 'OWNER_ROLE_REQUIRED');
    const promoted = await identity.client.call(S.updateMember, { id: admin.member!.id, role: MemberRole.MEMBER_ROLE_OWNER }, ctx());
    assert.equal(promoted.role, MemberRole.MEMBER_ROLE_OWNER);
    // Two owners now: the first may be demoted.
    assert.equal((await identity.client.call(S.updateMember, { id: owner.member, role: MemberRole.MEMBER_ROLE_ADMIN }, asAdmin)).role, MemberRole.MEMBER_ROLE_ADMIN);
  });
});
