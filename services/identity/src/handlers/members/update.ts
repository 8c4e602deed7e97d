import { withTransaction, isUniqueViolation } from '@workauto/db';
import { errors, validate, patchNulls } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { effectiveAccess, isRole, type Role } from '../../domain/access.js';
import { assertAccessWithin, assertNotOutranked, assertNotOwn, assertRoleWithin } from '../../domain/grants.js';
import { assertKeepsAnOwner } from '../../domain/members.js';
import * as members from '../../repo/members.js';
import * as policies from '../../repo/access-policies.js';
import { SOURCE, caller, memberData, roles, toMember, type IdentityDeps, type Handler } from '../common.js';

export function updateMember({ pool }: IdentityDeps): Handler<'updateMember'> {
  return async (patchRequest, ctx) => {
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
  };
}
