import { errors } from '@workauto/grpc';
import * as members from '../../repo/members.js';
import * as policies from '../../repo/access-policies.js';
import { toPolicy, type IdentityDeps, type Handler } from '../common.js';

export function listAccessPolicies({ pool }: IdentityDeps): Handler<'listAccessPolicies'> {
  return async (req, ctx) => {
    if (!(await members.findMember(pool, ctx.tenant, req.member_id))) throw errors.notFound('member', req.member_id);
    return { data: (await policies.listPolicies(pool, ctx.tenant, req.member_id)).map(toPolicy) };
  };
}
