import { withTransaction, newId } from '@workauto/db';
import { validate } from '@workauto/grpc';
import { generateToken, sha256Hex } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import { NO_ACCESS, effectiveAccess, type Role } from '../../domain/access.js';
import { assertAccessWithin, assertRoleWithin } from '../../domain/grants.js';
import { DEFAULT_EXPIRY_HOURS } from '../../domain/invitations.js';
import { assertNoResourceFilters, policyViolations, type PolicyInput } from '../../domain/policies.js';
import * as invitations from '../../repo/invitations.js';
import {
  SOURCE,
  caller,
  invitationData,
  levels,
  roles,
  toInvitation,
  type IdentityDeps,
  type Handler,
} from '../common.js';

export function createInvitation({ pool }: IdentityDeps): Handler<'createInvitation'> {
  return async (req, ctx) => {
    const role = roles.toDomain(req.role);
    const inputs = req.access_policies.map((p) => ({
      domain: p.domain,
      access_level: levels.toDomain(p.access_level),
    }));
    assertNoResourceFilters('access_policies', req.access_policies);
    const v = validate();
    for (const violation of policyViolations('access_policies', inputs)) v.add(violation.field, violation.description);
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
  };
}
