import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as apiKeys from '../../repo/api-keys.js';
import * as members from '../../repo/members.js';
import { NO_ACCESS } from '../../domain/access.js';
import { assertMayAddApiKey } from '../../domain/api-keys.js';
import { assertAccessWithin, assertNotOutranked } from '../../domain/grants.js';
import {
  SOURCE,
  accessOf,
  apiKeyData,
  assertMembersAdmin,
  caller,
  toApiKey,
  type IdentityDeps,
  type Handler,
} from '../common.js';
import { issueApiKey } from './common.js';

export function createApiKey({ pool }: IdentityDeps): Handler<'createApiKey'> {
  return async (req, ctx) => {
    return withTransaction(
      pool,
      async (tx) => {
        const me = await caller(tx, ctx);
        const memberId = req.member_id || me.id; // '' is absent, as the validator reads it
        if (memberId !== me.id) assertMembersAdmin(me.access, 'creating an API key for another member');
        const member = await members.findMember(tx, ctx.tenant, memberId, { forUpdate: true });
        if (!member) throw errors.notFound('member', memberId);
        if (member.id !== me.id) {
          // A key for another member acts as that member: only for one whose access the caller could grant.
          assertNotOutranked(me, member, 'create API keys');
          assertAccessWithin(me, NO_ACCESS, await accessOf(tx, member));
        }
        if (!member.is_active)
          throw errors.failedPrecondition(
            'MEMBER_INACTIVE',
            'the member is deactivated and cannot hold keys (deactivation is final); create the key for an active member',
          );
        // The member row lock above serialises concurrent creates, so the count cannot be overtaken.
        assertMayAddApiKey(await apiKeys.countActiveApiKeys(tx, ctx.tenant, member.id));
        const { key, row } = await issueApiKey(tx, ctx.tenant, member.id, req.name.trim());
        await recordEvent(tx, SOURCE, ctx, {
          type: 'api_key.created',
          resourceType: 'api_key',
          resourceId: row.id,
          data: apiKeyData(row),
          metadata: { member_id: member.id, name: row.name },
        });
        return toApiKey(row, key);
      },
      { signal: ctx.signal },
    );
  };
}
