import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { assertNotOutranked } from '../../domain/grants.js';
import { assertKeepsAnOwner } from '../../domain/members.js';
import * as members from '../../repo/members.js';
import { SOURCE, caller, memberData, toMember, type IdentityDeps, type Handler } from '../common.js';

export function deactivateMember({ pool }: IdentityDeps): Handler<'deactivateMember'> {
  return async (req, ctx) => {
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
  };
}
