import { withTransaction, newId, isUniqueViolation } from '@workauto/db';
import * as grpc from '@grpc/grpc-js';
import { DomainError, errors, parsePage, toPage, validate, type Handlers } from '@workauto/grpc';
import { generateToken, sha256Hex } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import type { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import { NO_ACCESS, effectiveAccess, type Role } from '../domain/access.js';
import { assertAccessWithin, assertRoleWithin } from '../domain/grants.js';
import { DEFAULT_EXPIRY_HOURS, assertClaimable, invitationStatus } from '../domain/invitations.js';
import { assertNoResourceFilters, policyViolations, type PolicyInput } from '../domain/policies.js';
import * as invitations from '../repo/invitations.js';
import * as members from '../repo/members.js';
import * as policies from '../repo/access-policies.js';
import {
  SOURCE,
  apiKeyData,
  caller,
  invitationData,
  levels,
  memberData,
  roles,
  toInvitation,
  toMember,
  toPolicy,
  type IdentityDeps,
} from './common.js';
import { issueApiKey } from './members.js';

type H = Handlers<typeof IdentityServiceService>;

export function invitationHandlers({
  pool,
}: IdentityDeps): Pick<H, 'createInvitation' | 'listInvitations' | 'revokeInvitation' | 'claimInvitation'> {
  return {
    async createInvitation(req, ctx) {
      const role = roles.toDomain(req.role);
      const inputs = req.access_policies.map((p) => ({
        domain: p.domain,
        access_level: levels.toDomain(p.access_level),
      }));
      assertNoResourceFilters('access_policies', req.access_policies);
      const v = validate();
      for (const violation of policyViolations('access_policies', inputs))
        v.add(violation.field, violation.description);
      v.done();
      const code = generateToken('inv_', 32);
      const expiresAt = new Date(Date.now() + (req.expires_in_hours ?? DEFAULT_EXPIRY_HOURS) * 3_600_000);
      return withTransaction(
        pool,
        async (tx) => {
          const me = await caller(tx, ctx);
          // The invitee will hold this role and these policies: the inviter could not grant more.
          assertRoleWithin(me, role as Role);
          assertAccessWithin(me, NO_ACCESS, effectiveAccess(role as Role, inputs as PolicyInput[]));
          const row = await invitations.insertInvitation(tx, {
            id: newId(),
            tenant_id: ctx.tenant,
            email: req.email.trim(),
            name: req.name?.trim() || null,
            role: role as 'member',
            access_policies: inputs as PolicyInput[],
            code_hash: sha256Hex(code),
            expires_at: expiresAt,
          });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'invitation.created',
            resourceType: 'invitation',
            resourceId: row.id,
            data: invitationData(row),
            metadata: { email: row.email, role: row.role },
          });
          return toInvitation(row, code);
        },
        { signal: ctx.signal },
      );
    },

    async listInvitations(req, ctx) {
      const page = parsePage(req);
      return toPage(await invitations.listInvitations(pool, ctx.tenant, page), (r) => toInvitation(r));
    },

    async revokeInvitation(req, ctx) {
      return withTransaction(
        pool,
        async (tx) => {
          await caller(tx, ctx);
          const row = await invitations.findInvitation(tx, ctx.tenant, req.id, { forUpdate: true });
          if (!row) throw errors.notFound('invitation', req.id);
          const status = invitationStatus(row);
          if (status === 'claimed')
            throw errors.failedPrecondition(
              'INVITATION_ALREADY_CLAIMED',
              'a claimed invitation cannot be revoked; deactivate the member instead',
            );
          if (status === 'revoked') return toInvitation(row);
          const revoked = await invitations.markInvitation(tx, ctx.tenant, row.id, { revoked: true });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'invitation.revoked',
            resourceType: 'invitation',
            resourceId: row.id,
            data: invitationData(revoked),
          });
          return toInvitation(revoked);
        },
        { signal: ctx.signal },
      );
    },

    async claimInvitation(req, ctx) {
      // One transaction: the invitation row lock makes concurrent claims of one code queue, and
      // only the first sees it pending; member, policies and key commit with the claim or not at all.
      return withTransaction(
        pool,
        async (tx) => {
          const inv = await invitations.lockInvitationByCode(tx, sha256Hex(req.code));
          if (!inv)
            throw new DomainError(
              grpc.status.NOT_FOUND,
              'INVITATION_NOT_FOUND',
              'no invitation has this code; check it, or ask for a new invitation',
            );
          assertClaimable(invitationStatus(inv));
          let member: members.MemberRow;
          try {
            member = await members.insertMember(tx, {
              id: newId(),
              tenant_id: inv.tenant_id,
              name: inv.name ?? inv.email,
              email: inv.email,
              role: inv.role,
            });
          } catch (err) {
            if (isUniqueViolation(err))
              throw errors.alreadyExists('MEMBER_EMAIL_TAKEN', `${inv.email} is already a member of this tenant`);
            throw err;
          }
          const policyRows = await policies.replacePolicies(tx, inv.tenant_id, member.id, inv.access_policies);
          const { key, row: keyRow } = await issueApiKey(tx, inv.tenant_id, member.id, 'first key');
          const claimed = await invitations.markInvitation(tx, inv.tenant_id, inv.id, { claimed_member_id: member.id });
          const actorCtx = { ...ctx, tenantId: inv.tenant_id, actor: { type: 'member', id: member.id } };
          await recordEvent(tx, SOURCE, actorCtx, {
            type: 'invitation.claimed',
            resourceType: 'invitation',
            resourceId: inv.id,
            data: invitationData(claimed),
            metadata: { member_id: member.id },
          });
          await recordEvent(tx, SOURCE, actorCtx, {
            type: 'member.created',
            resourceType: 'member',
            resourceId: member.id,
            data: memberData(member),
          });
          await recordEvent(tx, SOURCE, actorCtx, {
            type: 'api_key.created',
            resourceType: 'api_key',
            resourceId: keyRow.id,
            data: apiKeyData(keyRow),
          });
          return { member: toMember(member), access_policies: policyRows.map(toPolicy), api_key: key };
        },
        { signal: ctx.signal },
      );
    },
  };
}
