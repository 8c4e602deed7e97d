import { withTransaction } from '@workauto/db';
import { errors, parsePage, toPage, type Handlers } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import * as apiKeys from '../repo/api-keys.js';
import * as members from '../repo/members.js';
import { NO_ACCESS } from '../domain/access.js';
import { assertMayAddApiKey } from '../domain/api-keys.js';
import { assertAccessWithin, assertNotOutranked } from '../domain/grants.js';
import { SOURCE, accessOf, apiKeyData, assertMembersAdmin, caller, toApiKey, type IdentityDeps } from './common.js';
import { issueApiKey } from './members.js';

type H = Handlers<typeof IdentityServiceService>;

/** Every caller manages its own keys; another member's keys need admin on members (docs/api.md §3). */
export function apiKeyHandlers({ pool }: IdentityDeps): Pick<H, 'listApiKeys' | 'createApiKey' | 'revokeApiKey'> {
  return {
    async listApiKeys(req, ctx) {
      const page = parsePage(req);
      const me = await caller(pool, ctx);
      const memberId = req.member_id || me.member.id; // '' is absent, as the validator reads it
      if (memberId !== me.member.id) {
        assertMembersAdmin(me.access, "listing another member's API keys");
        if (!(await members.findMember(pool, ctx.tenant, memberId))) throw errors.notFound('member', memberId);
      }
      return toPage(await apiKeys.listApiKeys(pool, ctx.tenant, memberId, page), (r) => toApiKey(r));
    },

    async createApiKey(req, ctx) {
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
    },

    async revokeApiKey(req, ctx) {
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
    },
  };
}
