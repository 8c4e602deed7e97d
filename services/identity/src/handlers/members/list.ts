import { parsePage, toPage } from '@workauto/grpc';
import * as members from '../../repo/members.js';
import { toMember, type IdentityDeps, type Handler } from '../common.js';

export function listMembers({ pool }: IdentityDeps): Handler<'listMembers'> {
  return async (req, ctx) => {
    const page = parsePage(req);
    return toPage(await members.listMembers(pool, ctx.tenant, page), toMember);
  };
}
