/**
 * Writes authenticated from the cache, and a change that takes a grant away (docs/identity.md, "The
 * gateway's authentication cache"): the lease's rules on a clock the test moves, then the
 * Authenticator against a real identity, each change made straight at identity (no gateway
 * proxies it, so only the revocation epoch can tell the cache).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Downstream, callerAudience, type UnaryMethod } from '@workauto/grpc';
import { createIdentityService } from '@workauto/identity';
import { createLogger } from '@workauto/logger';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { IdentityServiceService as S, MemberRole } from '@workauto/protos/workauto/identity/v1/identity.js';
import {
  InstantClock,
  ManualClock,
  TestClient,
  callAs,
  eventually,
  testCallerKeys,
  testDatabase,
  testSigner,
} from '@workauto/testing';
import { Authenticator } from './auth.js';
import { WriteLease, type RevocationEpoch } from './write-lease.js';

describe('the write lease', () => {
  /** A lease on a clock the test moves, whose reads answer `answer` (or fail when it throws). */
  async function started(answer: () => RevocationEpoch) {
    const clock = new ManualClock(0);
    let forgotten = 0;
    let reads = 0;
    const lease = new WriteLease(
      async () => {
        reads++;
        return answer();
      },
      () => forgotten++,
      undefined,
      clock,
    );
    assert.equal(lease.writesMayUseCache(), false, 'no read yet: the first write asks identity');
    await eventually('the first read', () => reads === 1 && clock.sleeping === 1);
    return { clock, lease, forgotten: () => forgotten, reads: () => reads };
  }

  it("lets writes use the cache for 90 % of identity's lease after a read was sent, forgetting the cache when the epoch grows", async () => {
    let answer: RevocationEpoch | undefined = { epoch: 7, write_lease_ms: 400 };
    const { clock, lease, forgotten, reads } = await started(() => {
      if (!answer) throw new Error('identity is away');
      return answer;
    });
    assert.equal(forgotten(), 1, 'what was cached before the first read is forgotten');
    assert.equal(lease.writesMayUseCache(), true);
    await clock.advance(100); // the next read, a quarter lease later: same epoch
    assert.equal(reads(), 2);
    assert.equal(forgotten(), 1);
    answer = { epoch: 8, write_lease_ms: 400 };
    await clock.advance(100);
    assert.equal(forgotten(), 2, 'a new epoch: every cached credential forgotten');
    assert.equal(lease.writesMayUseCache(), true);
    answer = undefined; // the reads fail from here: the lease of the read sent at 200 holds until 200 + 360
    await clock.advance(100);
    await clock.advance(259);
    assert.equal(lease.writesMayUseCache(), true);
    await clock.advance(1);
    assert.equal(lease.writesMayUseCache(), false);
    await lease.stop();
  });

  it('extends nothing on a failed read, or when identity gives no lease: writes ask identity once the last lease lapses', async () => {
    let answer: RevocationEpoch | undefined = { epoch: 1, write_lease_ms: 400 };
    const { clock, lease } = await started(() => {
      if (!answer) throw new Error('identity is away');
      return answer;
    });
    answer = undefined;
    await clock.advance(100); // a failed read; the next in a second
    assert.equal(lease.writesMayUseCache(), true, 'the lease of the read sent at 0 holds until 360');
    await clock.advance(260);
    assert.equal(lease.writesMayUseCache(), false);
    answer = { epoch: 1, write_lease_ms: 0 };
    await clock.advance(1_000);
    assert.equal(lease.writesMayUseCache(), false, 'a lease of 0: never');
    answer = { epoch: 1, write_lease_ms: 400 };
    await clock.advance(1_000);
    assert.equal(lease.writesMayUseCache(), true);
    await lease.stop();
  });

  it('stops reading after 30 s without a write, and the next write starts the reads again', async () => {
    // Every wait passes at once: the loop runs its 30 s of reads without the wall clock.
    const clock = new InstantClock(0);
    let reads = 0;
    const lease = new WriteLease(
      async () => {
        reads++;
        return { epoch: 1, write_lease_ms: 400 };
      },
      () => undefined,
      undefined,
      clock,
    );
    lease.writesMayUseCache();
    await eventually('the reads stopped', () => !lease.reading);
    assert.equal(reads, 300, 'a read every 100 ms, from 0 to 29,900');
    assert.equal(clock.now().getTime(), 30_000);
    assert.equal(lease.writesMayUseCache(), true, 'the lease of the read sent at 29,900 holds until 30,260');
    assert.equal(lease.reading, true, 'the write started the reads again');
    await lease.stop();
  });
});

describe('writes from the cache against a real identity', () => {
  const ADMIN_TOKEN = `platform-admin-token-${randomUUID()}`;
  let identity: { port: number; stop(): Promise<void> };
  let client: TestClient;
  let auth: Authenticator;
  /** AuthenticateToken calls the Authenticator made: the sentinel that a write came from the cache. */
  let lookups = 0;
  let owner: ReturnType<typeof callAs>;

  /** The identity downstream of the Authenticator, counting token lookups on their way to identity. */
  class CountingDownstream extends Downstream {
    override call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, opts?: Parameters<Downstream['call']>[2]) {
      if (method.path === S.authenticateToken.path) lookups++;
      return super.call(method, request, opts);
    }
  }

  before(async () => {
    identity = await createIdentityService(
      {
        databaseUrl: await testDatabase('write_lease_identity'),
        host: '127.0.0.1',
        port: 0,
        callerVerifyKeys: testCallerKeys.verifyKeys,
        platformAdminToken: ADMIN_TOKEN,
        encryptionKeys: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
      },
      createLogger('identity', 'silent'),
    );
    const address = `127.0.0.1:${identity.port}`;
    client = new TestClient('identity', address, { volumeThreshold: 1_000 });
    const downstream = new CountingDownstream('identity', address, { volumeThreshold: 1_000 });
    // A cached answer would outlive every test by far: only the revocation epoch can end it for writes.
    // The lookups get 30 s, as e2e stacks give them: a loaded machine is slow, never wrong.
    auth = new Authenticator(() => downstream, 600_000, undefined, 30_000, { metadata });
    const made = await client.call(S.createTenant, {
      name: 'Lease',
      owner: { name: 'Owner', email: 'owner@lease.test' },
    });
    const principal = await client.call(S.authenticateToken, { token: made.api_key });
    owner = callAs(principal.tenant_id, principal.member_id, principal.actor_id);
  });
  after(async () => {
    await auth?.stop();
    client?.close();
    await identity?.stop();
  });

  /** A new member of the tenant (role `member`: write on notes) with its key. */
  async function member() {
    const invitation = await client.call(
      S.createInvitation,
      { email: `m-${randomUUID()}@lease.test`, role: MemberRole.MEMBER_ROLE_MEMBER, access_policies: [] },
      owner,
    );
    const claimed = await client.call(S.claimInvitation, { code: invitation.code });
    const key = claimed.api_key;
    const keyId = (await client.call(S.authenticateToken, { token: key })).actor_id;
    return { id: claimed.member!.id, key, keyId };
  }

  const WRITE_NOTES = { auth: 'api_key', method: 'POST', domain: 'notes', level: 'write' } as const;
  /** Signs the Authenticator's calls to identity, as the gateway does. */
  const metadata = () => testSigner.metadata({ requestId: randomUUID() }, callerAudience(S.authenticateToken.path));
  const write = (key: string) =>
    auth.authorize(
      WRITE_NOTES,
      { method: 'POST', get: (name: string) => (name === 'authorization' ? `Bearer ${key}` : undefined) },
      metadata,
    );

  /** The key's writes come from the cache: one write more asks identity nothing. */
  async function cachedForWrites(key: string) {
    await write(key);
    await eventually('a write authenticated from the cache', async () => {
      const before = lookups;
      await write(key);
      return lookups === before;
    });
  }

  const cases: [string, (m: Awaited<ReturnType<typeof member>>) => Promise<unknown>, number][] = [
    ['its key revoked', (m) => client.call(S.revokeApiKey, { id: m.keyId }, owner), grpc.status.UNAUTHENTICATED],
    [
      'its member deactivated',
      (m) => client.call(S.deactivateMember, { id: m.id }, owner),
      grpc.status.UNAUTHENTICATED,
    ],
    [
      "its member's role lowered to viewer",
      (m) => client.call(S.updateMember, { id: m.id, role: MemberRole.MEMBER_ROLE_VIEWER }, owner),
      grpc.status.PERMISSION_DENIED,
    ],
    [
      "its member's access to notes lowered to read",
      (m) =>
        client.call(
          S.replaceAccessPolicies,
          { member_id: m.id, policies: [{ domain: 'notes', access_level: AccessLevel.ACCESS_LEVEL_READ }] },
          owner,
        ),
      grpc.status.PERMISSION_DENIED,
    ],
  ];
  for (const [what, change, code] of cases)
    it(`a key cached for writes writes nothing once ${what} is answered (the change made straight at identity)`, async () => {
      const m = await member();
      await cachedForWrites(m.key);
      await change(m);
      await assert.rejects(write(m.key), (err: { code?: number }) => {
        assert.equal(err.code, code);
        return true;
      });
    });
});
