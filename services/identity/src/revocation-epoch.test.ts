/**
 * The revocation epoch (docs/identity.md, "The gateway's authentication cache"): it grows in the
 * transaction of every change that may take a grant away, whoever makes it, and not with changes
 * that take none (a gateway that sees it grow forgets every cached credential).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { IdentityServiceService as S, MemberRole } from '@workauto/protos/workauto/identity/v1/identity.js';
import { callAs } from '@workauto/testing';
import { startIdentity } from './test-support.js';

describe('the revocation epoch', () => {
  let identity: Awaited<ReturnType<typeof startIdentity>>;
  let owner: ReturnType<typeof callAs>;

  before(async () => {
    identity = await startIdentity();
    const made = await identity.bootstrap('Epoch');
    owner = await identity.asKey(made.api_key);
  });
  after(() => identity?.stop());

  const epoch = async () => (await identity.client.call(S.getRevocationEpoch, {})).epoch;

  async function member() {
    const invitation = await identity.client.call(
      S.createInvitation,
      { email: `m-${crypto.randomUUID()}@epoch.test`, role: MemberRole.MEMBER_ROLE_MEMBER, access_policies: [] },
      owner,
    );
    const claimed = await identity.client.call(S.claimInvitation, { code: invitation.code });
    const keyId = (await identity.client.call(S.authenticateToken, { token: claimed.api_key })).actor_id;
    return { id: claimed.member!.id, keyId };
  }

  it('grows with a key revoked, a member deactivated, a role or policies changed; not with a rename or a new key', async () => {
    const m = await member();
    const grows = async (what: string, change: () => Promise<unknown>, by: 'grows' | 'stays') => {
      const before = await epoch();
      await change();
      const now = await epoch();
      if (by === 'grows') assert.ok(now > before, `${what}: ${before} → ${now}`);
      else assert.equal(now, before, what);
    };
    await grows(
      'a rename',
      () =>
        identity.client.call(
          S.updateMember,
          { id: m.id, name: 'Renamed', role: MemberRole.MEMBER_ROLE_UNSPECIFIED },
          owner,
        ),
      'stays',
    );
    await grows(
      'a new key',
      () => identity.client.call(S.createApiKey, { name: 'more', member_id: m.id }, owner),
      'stays',
    );
    await grows('a key revoked', () => identity.client.call(S.revokeApiKey, { id: m.keyId }, owner), 'grows');
    await grows(
      'a role changed',
      () => identity.client.call(S.updateMember, { id: m.id, role: MemberRole.MEMBER_ROLE_VIEWER }, owner),
      'grows',
    );
    await grows(
      'policies replaced',
      () =>
        identity.client.call(
          S.replaceAccessPolicies,
          { member_id: m.id, policies: [{ domain: 'notes', access_level: AccessLevel.ACCESS_LEVEL_NONE }] },
          owner,
        ),
      'grows',
    );
    await grows('a member deactivated', () => identity.client.call(S.deactivateMember, { id: m.id }, owner), 'grows');
    // Not only through the rpcs: an operator's SQL bumps it in its own transaction too.
    const other = await member();
    await grows(
      "an operator's UPDATE",
      async () => {
        const db = new pg.Client({ connectionString: identity.databaseUrl });
        await db.connect();
        try {
          await db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [other.keyId]);
        } finally {
          await db.end();
        }
      },
      'grows',
    );
  });

  it('tells the gateways the write lease (AUTH_WRITE_LEASE_MS, 500 ms by default)', async () => {
    assert.equal((await identity.client.call(S.getRevocationEpoch, {})).write_lease_ms, 500);
  });
});
