import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadProtoRoot } from '@workauto/protos';
import { Member, UpdateMemberRequest, MemberRole } from '@workauto/protos/workauto/identity/v1/identity.js';
import { MappingError, messageFromJson, messageToJson, timestampToJson, type Violation } from './json-mapping.js';
import { compileTemplate, matchRoute, buildRoutes } from './routes.js';

const root = loadProtoRoot(['workauto/identity/v1/identity.proto']);
const memberType = root.lookupType('workauto.identity.v1.Member');
const updateType = root.lookupType('workauto.identity.v1.UpdateMemberRequest');

function fromJson(type: typeof memberType, json: unknown) {
  const out: Violation[] = [];
  const obj = messageFromJson(type, json, '', out);
  if (out.length) throw new MappingError(out);
  return obj!;
}

describe('JSON → proto', () => {
  it('maps snake_case fields, lowercase enums, Struct and optional fields, and the service reads them', () => {
    const obj = fromJson(updateType, { id: 'x', name: 'Ann', role: 'viewer', metadata: { a: [1, 'two', { three: null }], ok: true } });
    const bytes = updateType.encode(updateType.fromObject(obj)).finish();
    const decoded = UpdateMemberRequest.decode(bytes); // as the service (ts-proto) sees it
    assert.equal(decoded.name, 'Ann');
    assert.equal(decoded.role, MemberRole.MEMBER_ROLE_VIEWER);
    assert.deepEqual(decoded.metadata, { a: [1, 'two', { three: null }], ok: true });
    assert.equal(decoded.email, undefined, 'an absent optional field stays unset');
  });

  it('rejects unknown fields, wrong types and unknown enum values with their paths', () => {
    assert.throws(
      () => fromJson(updateType, { nme: 'typo', name: 5, role: 'king', metadata: [1] }),
      (err: MappingError) => {
        assert.deepEqual(err.violations.map((v) => v.field).sort(), ['metadata', 'name', 'nme', 'role']);
        return true;
      },
    );
    assert.throws(() => fromJson(updateType, { role: 'VIEWER' }), /role/);
    assert.throws(() => fromJson(updateType, ['not', 'an', 'object']), /JSON object/);
  });

  it('parses RFC 3339 timestamps and refuses other strings', () => {
    const out: Violation[] = [];
    const ts = messageFromJson(memberType, { created_at: '2026-11-22T10:00:00.123456+01:00' }, '', out) as { created_at: { seconds: number; nanos: number } };
    assert.deepEqual(out, []);
    assert.equal(ts.created_at.seconds, Date.UTC(2026, 10, 22, 9, 0, 0) / 1000);
    assert.equal(ts.created_at.nanos, 123456000);
    messageFromJson(memberType, { created_at: 'yesterday' }, '', out);
    assert.equal((out as Violation[])[0]?.field, 'created_at');
  });
});

describe('proto → JSON', () => {
  it('writes every field: defaults, nulls for unset optionals, RFC 3339 with microseconds, raw metadata', () => {
    const bytes = Member.encode({
      id: 'm1', tenant_id: 't1', name: 'Ann', role: MemberRole.MEMBER_ROLE_OWNER, is_active: false,
      metadata: { k: 'v', n: 2 }, created_at: new Date('2026-11-22T10:00:00.123Z'), updated_at: undefined,
    }).finish();
    const json = messageToJson(memberType, memberType.decode(bytes) as unknown as Record<string, unknown>);
    assert.deepEqual(json, {
      id: 'm1', tenant_id: 't1', name: 'Ann', role: 'owner', is_active: false, metadata: { k: 'v', n: 2 },
      created_at: '2026-11-22T10:00:00.123000Z', updated_at: null, email: null, contact_id: null,
    });
    assert.equal(timestampToJson(0, 5000), '1970-01-01T00:00:00.000005Z');
  });
});

describe('routes', () => {
  it('are built from the annotations, literal segments first', () => {
    const routes = buildRoutes(root);
    const claim = matchRoute(routes, 'POST', '/api/v1/invitations/claim');
    assert.ok(claim && 'route' in claim && claim.route.rpc === 'ClaimInvitation' && claim.route.auth === 'none');
    const get = matchRoute(routes, 'GET', '/api/v1/members/abc');
    assert.ok(get && 'route' in get && get.params.id === 'abc' && get.route.domain === 'members' && get.route.level === 'read');
    const wrong = matchRoute(routes, 'PUT', '/api/v1/members/abc');
    assert.ok(wrong && 'methodNotAllowed' in wrong && wrong.methodNotAllowed.includes('GET'));
    assert.equal(matchRoute(routes, 'GET', '/api/v1/nothing'), undefined);
    const create = routes.find((r) => r.rpc === 'CreateInvitation')!;
    assert.equal(create.successStatus, 201);
    assert.equal(routes.find((r) => r.rpc === 'DeleteIntegrationKey')!.successStatus, 204);
    assert.equal(routes.find((r) => r.rpc === 'CompleteOAuthAuthorization')!.successStatus, 302);
    assert.equal(routes.some((r) => r.rpc === 'AuthenticateToken'), false, 'rpcs without annotation are not routable');
  });

  it('compiles templates into anchored patterns', () => {
    const t = compileTemplate('/api/v1/members/{member_id}/access-policies');
    assert.deepEqual(t.params, ['member_id']);
    assert.equal(t.pattern.test('/api/v1/members/x/access-policies'), true);
    assert.equal(t.pattern.test('/api/v1/members/x/access-policies/extra'), false);
  });
});
