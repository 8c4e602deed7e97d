import { withTransaction, newId, isUniqueViolation, type PoolClient } from '@workauto/db';
import { errors, parsePage, toPage, validate, type Handlers, patchNulls } from '@workauto/grpc';
import { generateToken, hint, sha256Hex, secretsEqual } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import { ActorType, MemberRole, type IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import { effectiveAccess, isRole, type Role } from '../domain/access.js';
import { assertAccessWithin, assertNotOutranked, assertNotOwn, assertRoleWithin } from '../domain/grants.js';
import { assertKeepsAnOwner } from '../domain/members.js';
import * as apiKeys from '../repo/api-keys.js';
import * as members from '../repo/members.js';
import * as policies from '../repo/access-policies.js';
import * as tenants from '../repo/tenants.js';
import {
  SOURCE,
  apiKeyData,
  caller,
  levels,
  memberData,
  roles,
  tenantData,
  toMember,
  type IdentityDeps,
} from './common.js';

type H = Handlers<typeof IdentityServiceService>;

/** Issues a new API key for a member: returns the key (shown once) and stores only its hash. */
export async function issueApiKey(tx: PoolClient, tenantId: string, memberId: string, name: string) {
  const key = generateToken('wk_', 40);
  const row = await apiKeys.insertApiKey(tx, {
    id: newId(),
    tenant_id: tenantId,
    member_id: memberId,
    name,
    key_hash: sha256Hex(key),
    key_hint: hint(key),
  });
  return { key, row };
}

export function memberHandlers({
  pool,
  platformAdminToken,
}: IdentityDeps): Pick<
  H,
  'createTenant' | 'listMembers' | 'getMember' | 'updateMember' | 'deactivateMember' | 'authenticateToken'
> {
  return {
    async createTenant(req, ctx) {
      const owner = req.owner!;
      return withTransaction(
        pool,
        async (tx) => {
          const tenant = await tenants.insertTenant(tx, { id: newId(), name: req.name.trim() });
          const member = await members.insertMember(tx, {
            id: newId(),
            tenant_id: tenant.id,
            name: owner.name.trim(),
            email: owner.email.trim(),
            role: 'owner',
          });
          const { key, row: keyRow } = await issueApiKey(tx, tenant.id, member.id, 'owner key');
          const ev = { tenantId: tenant.id };
          await recordEvent(tx, SOURCE, ctx, {
            ...ev,
            type: 'tenant.created',
            resourceType: 'tenant',
            resourceId: tenant.id,
            data: tenantData(tenant),
          });
          await recordEvent(tx, SOURCE, ctx, {
            ...ev,
            type: 'member.created',
            resourceType: 'member',
            resourceId: member.id,
            data: memberData(member),
          });
          await recordEvent(tx, SOURCE, ctx, {
            ...ev,
            type: 'api_key.created',
            resourceType: 'api_key',
            resourceId: keyRow.id,
            data: apiKeyData(keyRow),
          });
          return {
            tenant: { id: tenant.id, name: tenant.name, created_at: tenant.created_at },
            member: toMember(member),
            api_key: key,
          };
        },
        { signal: ctx.signal },
      );
    },

    async listMembers(req, ctx) {
      const page = parsePage(req);
      return toPage(await members.listMembers(pool, ctx.tenant, page), toMember);
    },

    async getMember(req, ctx) {
      const row = await members.findMember(pool, ctx.tenant, req.id);
      if (!row) throw errors.notFound('member', req.id);
      return toMember(row);
    },

    async updateMember(patchRequest, ctx) {
      const v = validate();
      const { req } = patchNulls(patchRequest, { text: ['contact_id'] }, v);
      const role = roles.toDomain(req.role);
      v.done();
      return withTransaction(
        pool,
        async (tx) => {
          const me = await caller(tx, ctx);
          const owners = role ? await members.lockActiveOwners(tx, ctx.tenant) : [];
          const current = await members.findMember(tx, ctx.tenant, req.id, { forUpdate: true });
          if (!current) throw errors.notFound('member', req.id);
          if (role && isRole(role) && role !== current.role) {
            assertNotOwn(me, current.id, 'role');
            assertNotOutranked(me, current, 'change the role');
            assertRoleWithin(me, role);
            const overrides = await policies.listPolicies(tx, ctx.tenant, current.id);
            assertAccessWithin(me, effectiveAccess(current.role, overrides), effectiveAccess(role, overrides));
            if (current.role === 'owner' && current.is_active) assertKeepsAnOwner(owners, current.id);
          }
          const patch = {
            name: req.name?.trim(),
            email: req.email === undefined ? undefined : req.email.trim() || null,
            role: role as Role | undefined,
            contact_id: req.contact_id === undefined ? undefined : req.contact_id || null,
            metadata: req.metadata,
          };
          let updated: members.MemberRow;
          try {
            updated = await members.updateMember(tx, ctx.tenant, req.id, patch);
          } catch (err) {
            if (isUniqueViolation(err))
              throw errors.alreadyExists('MEMBER_EMAIL_TAKEN', `another member of this tenant has email ${req.email}`);
            throw err;
          }
          const changed = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
          await recordEvent(tx, SOURCE, ctx, {
            type: 'member.updated',
            resourceType: 'member',
            resourceId: updated.id,
            data: memberData(updated),
            metadata: changed,
          });
          return toMember(updated);
        },
        { signal: ctx.signal },
      );
    },

    async deactivateMember(req, ctx) {
      return withTransaction(
        pool,
        async (tx) => {
          const me = await caller(tx, ctx);
          const owners = await members.lockActiveOwners(tx, ctx.tenant);
          const current = await members.findMember(tx, ctx.tenant, req.id, { forUpdate: true });
          if (!current) throw errors.notFound('member', req.id);
          if (!current.is_active) return toMember(current); // deactivating twice is harmless
          assertNotOutranked(me, current, 'deactivate the membership');
          if (current.role === 'owner') assertKeepsAnOwner(owners, current.id);
          const updated = await members.updateMember(tx, ctx.tenant, req.id, { is_active: false });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'member.deactivated',
            resourceType: 'member',
            resourceId: updated.id,
            data: memberData(updated),
            metadata: { is_active: false },
          });
          return toMember(updated);
        },
        { signal: ctx.signal },
      );
    },

    async authenticateToken(req) {
      const token = req.token;
      if (token && secretsEqual(token, platformAdminToken)) {
        return {
          actor_type: ActorType.ACTOR_TYPE_PLATFORM_ADMIN,
          actor_id: 'platform',
          tenant_id: '',
          member_id: '',
          role: MemberRole.MEMBER_ROLE_UNSPECIFIED,
          access: {},
        };
      }
      if (!token?.startsWith('wk_'))
        throw errors.unauthenticated(
          'INVALID_CREDENTIAL',
          'the bearer token is not a valid API key; check the key or create a new one',
        );
      const cred = await apiKeys.findCredential(pool, sha256Hex(token));
      if (!cred)
        throw errors.unauthenticated(
          'INVALID_CREDENTIAL',
          'the API key is invalid, revoked, or its member is deactivated',
        );
      const overrides = await policies.listPolicies(pool, cred.tenant_id, cred.member_id);
      const access = Object.fromEntries(
        Object.entries(effectiveAccess(cred.role, overrides)).map(([d, l]) => [d, levels.fromDomain(l)]),
      );
      return {
        actor_type: ActorType.ACTOR_TYPE_API_KEY,
        actor_id: cred.key_id,
        tenant_id: cred.tenant_id,
        member_id: cred.member_id,
        role: roles.fromDomain(cred.role),
        access,
      };
    },
  };
}
