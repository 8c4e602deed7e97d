import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { createClient } from '@workauto/client';
import { Keyring } from '@workauto/crypto';
import { createGateway, type Gateway } from '@workauto/gateway';
import { createIdentityService, type OAuthSettings, type RunningService } from '@workauto/identity';
import { generateCallerKeys } from '@workauto/grpc';
import { createLogger } from '@workauto/logger';
import { freePort } from '@workauto/testing';
import {
  assertError,
  fails,
  ok,
  startTestStack,
  type TestStack,
  type TenantFixture,
  E2E_DEADLINE_MS,
} from './harness.js';
import { startFakeIdp } from './fake-idp.js';

/**
 * What two replicas of the product see: a second gateway (and, for OAuth, a second identity) on
 * the same databases, as the chart runs them (2 gateway replicas by default).
 */
describe('replicas: revocation and OAuth across instances', () => {
  const AUTH_CACHE_TTL_MS = 60_000; // far longer than any test: a cached answer would outlive it
  const encryptionKeys = Keyring.generateSpec();
  const callerKeys = generateCallerKeys('gateway');
  let stack: TestStack;
  let idp: Awaited<ReturnType<typeof startFakeIdp>>;
  let oauth: OAuthSettings;
  let tenant: TenantFixture;
  const extra: { close(): Promise<void> }[] = [];

  before(async () => {
    idp = await startFakeIdp({ clientId: 'workauto-test', clientSecret: 'idp-client-secret-value' });
    const port = await freePort();
    oauth = {
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
    };
    stack = await startTestStack({
      gatewayPort: port,
      encryptionKeys,
      callerKeys,
      oauth,
      gatewayOptions: { authCacheTtlMs: AUTH_CACHE_TTL_MS },
    });
    tenant = await stack.createTenant('Replicas');
  });
  after(async () => {
    for (const e of extra.reverse()) await e.close();
    await stack?.stop();
    await idp?.close();
  });

  /** Another gateway replica: same downstreams (or another identity), same database, same long cache. */
  async function gatewayReplica(identityAddr?: string) {
    const downstreams = Object.fromEntries(
      Object.entries(stack.services).map(([name, s]) => [name, `127.0.0.1:${s.port}`]),
    );
    if (identityAddr) downstreams.identity = identityAddr;
    const gateway: Gateway = await createGateway({
      logger: createLogger('gateway-b', 'silent'),
      downstreams,
      databaseUrl: stack.databaseUrl('gateway'),
      encryptionKeys,
      deadlineMs: E2E_DEADLINE_MS,
      callerSigningKey: callerKeys.signingKey,
      authCacheTtlMs: AUTH_CACHE_TTL_MS,
    });
    const port = await gateway.listen('127.0.0.1', 0);
    extra.push(gateway);
    /** The typed client through this replica. */
    const client = (key: string) => createClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: key });
    return { port, client };
  }

  async function newAdmin() {
    const inv = await ok(
      stack.client(tenant.key).POST('/api/v1/invitations', {
        body: { email: `a-${randomUUID()}@replicas.test`, role: 'admin' },
      }),
      201,
    );
    const claimed = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
    return { id: claimed.member!.id, key: claimed.api_key };
  }

  /** Through replica B, whose cache still holds the key: no credential, note or member change is made. */
  async function assertNothingChanges(b: Awaited<ReturnType<typeof gatewayReplica>>, key: string, victimId: string) {
    const viaB = b.client(key);
    const victimPath = { params: { path: { id: victimId } } };
    // Another service first: an identity mutation through B would clear B's whole cache and hide the gap.
    await fails(viaB.POST('/api/v1/notes', { body: { title: 'written by a dead key' } }), 401);
    await fails(viaB.POST('/api/v1/api-keys', { body: { name: 'escape hatch' } }), 401);
    await fails(viaB.PATCH('/api/v1/members/{id}', { ...victimPath, body: { name: 'renamed by a dead key' } }), 401);
    await fails(
      viaB.PUT('/api/v1/members/{member_id}/access-policies', {
        params: { path: { member_id: victimId } },
        body: { policies: [] },
      }),
      401,
    );
    // And the refusal reaches this replica's reads too.
    await fails(viaB.GET('/api/v1/members'), 401);
    const owner = stack.client(tenant.key);
    const victim = await ok(owner.GET('/api/v1/members/{id}', victimPath));
    assert.notEqual(victim.name, 'renamed by a dead key');
    const notes = await ok(owner.GET('/api/v1/notes', { params: { query: { limit: 100 } } }));
    assert.equal(
      notes.data.some((n) => n.title === 'written by a dead key'),
      false,
    );
  }

  /**
   * B has the key cached for reads and for writes: the writes are what start B's reads of the
   * revocation epoch, and from then on its writes are authenticated from the cache (docs/identity.md,
   * "The gateway's authentication cache").
   */
  async function cachedOn(b: Awaited<ReturnType<typeof gatewayReplica>>, key: string) {
    await ok(b.client(key).GET('/api/v1/members'));
    for (let i = 0; i < 3; i++)
      await ok(b.client(key).POST('/api/v1/notes', { body: { title: `cached by B ${i}` } }), 201);
  }

  it('a key revoked through replica A creates and changes nothing through replica B that has it cached', async () => {
    const b = await gatewayReplica();
    const admin = await newAdmin();
    const victim = await newAdmin();
    const keyCount = async () =>
      (
        await ok(
          stack.client(tenant.key).GET('/api/v1/api-keys', { params: { query: { member_id: admin.id, limit: 100 } } }),
        )
      ).data.length;
    await cachedOn(b, admin.key);
    const own = await ok(stack.client(admin.key).GET('/api/v1/api-keys'));
    await ok(stack.client(tenant.key).DELETE('/api/v1/api-keys/{id}', { params: { path: { id: own.data[0]!.id } } }));
    const before = await keyCount();
    await assertNothingChanges(b, admin.key, victim.id);
    assert.equal(await keyCount(), before, 'no key was minted for the revoked key');
  });

  it("a deactivated member's key creates and changes nothing through a replica that has it cached", async () => {
    const b = await gatewayReplica();
    const admin = await newAdmin();
    const victim = await newAdmin();
    await cachedOn(b, admin.key);
    await ok(stack.client(tenant.key).DELETE('/api/v1/members/{id}', { params: { path: { id: admin.id } } }));
    await assertNothingChanges(b, admin.key, victim.id);
  });

  it("a member's role or access lowered through replica A writes nothing the old grant allowed through replica B right after the answer", async () => {
    const b = await gatewayReplica();
    const lowerings: ((id: string) => Promise<{ response: Response }>)[] = [
      (id: string) =>
        stack.client(tenant.key).PATCH('/api/v1/members/{id}', { params: { path: { id } }, body: { role: 'viewer' } }),
      (id: string) =>
        stack.client(tenant.key).PUT('/api/v1/members/{member_id}/access-policies', {
          params: { path: { member_id: id } },
          body: { policies: [{ domain: 'notes', access_level: 'read' }] },
        }),
    ];
    for (const lower of lowerings) {
      const inv = await ok(
        stack.client(tenant.key).POST('/api/v1/invitations', {
          body: { email: `m-${randomUUID()}@replicas.test`, role: 'member' },
        }),
        201,
      );
      const member = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
      await cachedOn(b, member.api_key);
      const lowered = await lower(member.member!.id);
      assert.equal(lowered.response.status, 200);
      await fails(
        b.client(member.api_key).POST('/api/v1/notes', { body: { title: 'written with a lowered grant' } }),
        403,
      );
    }
  });

  it('an OAuth callback that meets a down IdP answers 503 in the error shape of docs/api.md §5 and keeps the state for a retry', async () => {
    // Replica B's identity has never talked to the IdP (fresh process: discovery not cached).
    const identityB: RunningService = await createIdentityService(
      {
        host: '127.0.0.1',
        port: 0,
        databaseUrl: stack.databaseUrl('identity'),
        transport: stack.transport,
        platformAdminToken: stack.adminToken,
        encryptionKeys,
        callerVerifyKeys: callerKeys.verifyKeys,
        oauth,
      },
      createLogger('identity-b', 'silent'),
    );
    extra.push({ close: () => identityB.stop() });
    const b = await gatewayReplica(`127.0.0.1:${identityB.port}`);
    const connection = randomUUID();
    const start = await ok(
      stack.client(tenant.key).POST('/api/v1/oauth/{idp}/authorize', {
        params: { path: { idp: 'fake' } },
        body: { connection_id: connection, return_to: 'https://app.example.com/settings' },
      }),
    );
    // Raw from here: the browser's redirects, IdP consent and the callback, followed by hand.
    const consent = await fetch(start.authorize_url, { redirect: 'manual' });
    const callback = new URL(consent.headers.get('location')!);
    const viaB = `http://127.0.0.1:${b.port}${callback.pathname}${callback.search}`;
    const viaA = `${stack.url}${callback.pathname}${callback.search}`;

    idp.setDown(true);
    try {
      // Discovery fails (replica B), then the token endpoint fails (replica A, discovery cached).
      for (const url of [viaB, viaA]) {
        const res = await fetch(url, { redirect: 'manual' });
        const body = await res.json();
        assertError({ status: res.status, headers: res.headers, body }, 503, 'IDP_UNAVAILABLE');
        assert.match(body.error.message, /retry/);
      }
    } finally {
      idp.setDown(false);
    }
    // The state was not burnt: the same callback completes once the IdP is back.
    const retried = await fetch(viaB, { redirect: 'manual' });
    assert.equal(retried.status, 302);
    const back = new URL(retried.headers.get('location')!);
    assert.equal(back.searchParams.get('status'), 'connected');
    assert.equal(back.searchParams.get('connection_id'), connection);
    // And it is still single-use.
    assert.equal((await fetch(viaA, { redirect: 'manual' })).status, 400);
  });
});
