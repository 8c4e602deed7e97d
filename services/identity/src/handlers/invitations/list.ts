import { parsePage, toPage } from '@workauto/grpc';
import * as invitations from '../../repo/invitations.js';
import { toInvitation, type IdentityDeps, type Handler } from '../common.js';

export function listInvitations({ pool }: IdentityDeps): Handler<'listInvitations'> {
  return async (req, ctx) => {
    const page = parsePage(req);
    return toPage(await invitations.listInvitations(pool, ctx.tenant, page), (r) => toInvitation(r));
  };
}
