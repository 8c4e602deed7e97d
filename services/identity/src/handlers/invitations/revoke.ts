import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { invitationStatus } from '../../domain/invitations.js';
import * as invitations from '../../repo/invitations.js';
import { SOURCE, caller, invitationData, toInvitation, type IdentityDeps, type Handler } from '../common.js';

export function revokeInvitation({ pool }: IdentityDeps): Handler<'revokeInvitation'> {
  return async (req, ctx) => {
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
  };
}
