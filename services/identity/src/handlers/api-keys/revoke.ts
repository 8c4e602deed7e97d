import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as apiKeys from '../../repo/api-keys.js';
import * as members from '../../repo/members.js';
import { assertNotOutranked } from '../../domain/grants.js';
import {
  SOURCE,
  apiKeyData,
  assertMembersAdmin,
  caller,
  toApiKey,
  type IdentityDeps,
  type Handler,
} from '../common.js';

export function revokeApiKey({ pool }: IdentityDeps): Handler<'revokeApiKey'> {
  return async (req, ctx) => {
    // Two members revoking each other's key at once deadlock (each holds its own key's
    // share lock): withTransaction reruns the victim, which sees its own key revoked and answers 401.
    return withTransaction(
      pool,
      async (tx) => {
        const me = await caller(tx, ctx);
        const row = await apiKeys.findApiKey(tx, ctx.tenant, req.id);
        if (!row) throw errors.notFound('api_key', req.id);
        if (row.member_id !== me.id) {
          assertMembersAdmin(me.access, "revoking another member's API key");
          assertNotOutranked(me, (await members.findMember(tx, ctx.tenant, row.member_id))!, 'revoke the API keys');
        }
        if (row.revoked_at) return toApiKey(row);
        const revoked = (await apiKeys.revokeApiKey(tx, ctx.tenant, req.id))!;
        await recordEvent(tx, SOURCE, ctx, {
          type: 'api_key.revoked',
          resourceType: 'api_key',
          resourceId: row.id,
          data: apiKeyData(revoked),
        });
        return toApiKey(revoked);
      },
      { signal: ctx.signal },
    );
  };
}
