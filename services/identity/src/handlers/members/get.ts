import { errors } from '@workauto/grpc';
import * as members from '../../repo/members.js';
import { toMember, type IdentityDeps, type Handler } from '../common.js';

export function getMember({ pool }: IdentityDeps): Handler<'getMember'> {
  return async (req, ctx) => {
    const row = await members.findMember(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('member', req.id);
    return toMember(row);
  };
}
