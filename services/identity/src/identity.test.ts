import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { IdentityServiceService as S, MemberRole, ActorType } from '@workauto/protos/workauto/identity/v1/identity.js';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import pg from 'pg';
import { updateMember } from './repo/members.js';
import { ADMIN_TOKEN as ADMIN, as, failure, startIdentity } from './test-support.js';

describe('identity over gRPC', () => {
  let identity: Awaited<ReturnType<typeof startIdentity>>;
  let client: Awaited<ReturnType<typeof startIdentity>>['client'];
  let dbUrl: string;
  const bootstrap = (name: string) => identity.bootstrap(name);

  before(async () => {
    identity = await startIdentity();
    client = identity.client;
    dbUrl = identity.databaseUrl;
  });
  after(() => identity.stop());

  it('bootstraps a tenant whose owner key authenticates with admin access everywhere', async () => {
    const created = await bootstrap('Acme');
    assert.match(created.api_key, /^wk_[0-9A-Za-z]{40}$/);
    assert.equal(created.member?.role, MemberRole.MEMBER_ROLE_OWNER);
    const principal = await client.call(S.authenticateToken, { token: created.api_key });
    assert.equal(principal.tenant_id, created.tenant?.id);
    assert.equal(principal.member_id, created.member?.id);
    assert.equal(principal.actor_type, ActorType.ACTOR_TYPE_API_KEY);
    assert.equal(principal.access.audit, AccessLevel.ACCESS_LEVEL_ADMIN);
  });

  it('stores only the SHA-256 of an API key, and no encoding of the key itself', async () => {
    const created = await bootstrap('Hashy');
    const key = created.api_key;
    const db = new pg.Client(dbUrl);
    await db.connect();
    const { rows } = await db.query('SELECT * FROM api_keys WHERE member_id = $1', [created.member?.id]);
    await db.end();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].key_hash, createHash('sha256').update(key).digest('hex'));
    assert.equal(rows[0].key_hint, key.slice(-4));
    const stored = JSON.stringify(rows);
    const secret = key.slice('wk_'.length);
    for (const value of [key, secret])
      for (const encoding of ['utf8', 'base64', 'base64url', 'hex'] as const) {
        const encoded = Buffer.from(value).toString(encoding);
        assert.equal(stored.includes(encoded), false, `the key (${encoding}) is not in the row`);
      }
  });

  it('refuses a member change naming a column the repo does not list, before any SQL', async () => {
    const created = await bootstrap('Columns');
    const db = new pg.Client(dbUrl);
    await db.connect();
    try {
      // What a request spread into the patch would bring: keys that are SQL, not columns.
      const fromRequest = JSON.parse('{"name": "x", "role = \'owner\', is_active": true}') as object;
      await assert.rejects(
        updateMember(db, created.tenant!.id, created.member!.id, fromRequest),
        /members: no writable column role = 'owner', is_active/,
      );
      const { rows } = await db.query('SELECT name FROM members WHERE id = $1', [created.member!.id]);
      assert.equal(rows[0].name, 'Columns owner', 'nothing was written');
    } finally {
      await db.end();
    }
  });

  it('rejects unknown tokens, and recognises the platform admin token', async () => {
    assert.equal(
      (await failure(client.call(S.authenticateToken, { token: 'wk_nope' }))).code,
      grpc.status.UNAUTHENTICATED,
    );
    assert.equal((await failure(client.call(S.authenticateToken, { token: '' }))).code, grpc.status.UNAUTHENTICATED);
    const admin = await client.call(S.authenticateToken, { token: ADMIN });
    assert.equal(admin.actor_type, ActorType.ACTOR_TYPE_PLATFORM_ADMIN);
    assert.equal(admin.tenant_id, '');
  });

  it('keeps tenants apart: another tenant sees NOT_FOUND and an empty list', async () => {
    const a = await bootstrap('Alpha');
    const b = await bootstrap('Beta');
    const err = await failure(client.call(S.getMember, { id: a.member!.id }, as(b.tenant!.id, b.member!.id)));
    assert.equal(err.code, grpc.status.NOT_FOUND);
    assert.equal(err.reason, 'MEMBER_NOT_FOUND');
    const list = await client.call(S.listMembers, {}, as(b.tenant!.id, b.member!.id));
    assert.deepEqual(
      list.data.map((m) => m.id),
      [b.member!.id],
    );
  });

  it('refuses to deactivate or demote the last active owner, and deactivation disables the key', async () => {
    const t = await bootstrap('Solo');
    const ctx = await identity.asKey(t.api_key);
    const deact = await failure(client.call(S.deactivateMember, { id: t.member!.id }, ctx));
    assert.equal(deact.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(deact.reason, 'LAST_OWNER');
    assert.equal(deact.httpStatus, 409);
    // Nobody changes their own role (docs/api.md §3), so the last owner cannot demote itself either.
    const demote = await failure(
      client.call(S.updateMember, { id: t.member!.id, role: MemberRole.MEMBER_ROLE_ADMIN }, ctx),
    );
    assert.deepEqual([demote.code, demote.reason], [grpc.status.PERMISSION_DENIED, 'OWN_ACCESS_CHANGE']);
    // Still an active owner with a working key.
    assert.equal((await client.call(S.authenticateToken, { token: t.api_key })).member_id, t.member!.id);
  });

  it('validates updates field by field', async () => {
    const t = await bootstrap('Valid');
    const err = await failure(
      client.call(
        S.updateMember,
        {
          id: t.member!.id,
          name: '',
          email: 'not-an-email',
          contact_id: 'x',
          role: 0,
          metadata: { big: 'z'.repeat(20_000) }, // past the 16 KiB every record's metadata may hold
        },
        as(t.tenant!.id, t.member!.id),
      ),
    );
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(err.fieldViolations.map((v) => v.field).sort(), ['contact_id', 'email', 'metadata', 'name']);
  });

  it('pages members newest first with an opaque cursor', async () => {
    const t = await bootstrap('Pager');
    const err = await failure(client.call(S.listMembers, { limit: 0 }, as(t.tenant!.id, t.member!.id)));
    assert.equal(err.fieldViolations[0]?.field, 'limit');
    const bad = await failure(client.call(S.listMembers, { cursor: 'garbage' }, as(t.tenant!.id, t.member!.id)));
    assert.equal(bad.fieldViolations[0]?.field, 'cursor');
    const page = await client.call(S.listMembers, { limit: 1 }, as(t.tenant!.id, t.member!.id));
    assert.equal(page.data.length, 1);
    assert.equal(page.has_more, false);
    assert.equal(page.next_cursor, undefined);
  });

  it('writes every mutation to the outbox in the same transaction', async () => {
    const t = await bootstrap('Evented');
    const db = new pg.Client(dbUrl);
    await db.connect();
    const { rows } = await db.query('SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq', [t.tenant!.id]);
    await db.end();
    assert.deepEqual(
      rows.map((r) => r.event_type),
      ['tenant.created', 'member.created', 'api_key.created'],
    );
  });
});
