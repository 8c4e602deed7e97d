import { withTransaction, newId, isLockNotAvailable, isUniqueViolation } from '@workauto/db';
import * as grpc from '@grpc/grpc-js';
import { DomainError, errors } from '@workauto/grpc';
import { sha256Hex } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import { assertClaimable, invitationStatus } from '../../domain/invitations.js';
import * as invitations from '../../repo/invitations.js';
import * as members from '../../repo/members.js';
import * as policies from '../../repo/access-policies.js';
import {
  SOURCE,
  apiKeyData,
  invitationData,
  memberData,
  toMember,
  toPolicy,
  type IdentityDeps,
  type Handler,
} from '../common.js';
import { issueApiKey } from '../api-keys/common.js';

export function claimInvitation({ pool }: IdentityDeps): Handler<'claimInvitation'> {
  return async (req, ctx) => {
    // One transaction: the invitation's row lock lets one claim of a code run at a time (the others
    // are refused, 409, without waiting); member, policies and key commit with the claim or not at all.
    return withTransaction(
      pool,
      async (tx) => {
        const inv = await invitations.lockInvitationByCode(tx, sha256Hex(req.code)).catch((err: unknown) => {
          if (!isLockNotAvailable(err)) throw err;
          // Another claim of the code is completing: it ends in a member or in an error within moments.
          throw new DomainError(
            grpc.status.ABORTED,
            'INVITATION_CLAIM_IN_PROGRESS',
            'another claim of this invitation is in progress; retry in a moment (it then answers with the member, or INVITATION_ALREADY_CLAIMED)',
          );
        });
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
  };
}
