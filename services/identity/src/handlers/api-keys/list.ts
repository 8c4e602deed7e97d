import { errors, parsePage, toPage } from '@workauto/grpc';
import * as apiKeys from '../../repo/api-keys.js';
import * as members from '../../repo/members.js';
import { assertMembersAdmin, caller, toApiKey, type IdentityDeps, type Handler } from '../common.js';

export function listApiKeys({ pool }: IdentityDeps): Handler<'listApiKeys'> {
  return async (req, ctx) => {
    const page = parsePage(req);
    const me = await caller(pool, ctx);
    const memberId = req.member_id || me.member.id; // '' is absent, as the validator reads it
    if (memberId !== me.member.id) {
      assertMembersAdmin(me.access, "listing another member's API keys");
      if (!(await members.findMember(pool, ctx.tenant, memberId))) throw errors.notFound('member', memberId);
    }
    return toPage(await apiKeys.listApiKeys(pool, ctx.tenant, memberId, page), (r) => toApiKey(r));
  };
}
