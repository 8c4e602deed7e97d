import { errors } from '@workauto/grpc';
import * as channels from '../../repo/channels.js';
import * as contacts from '../../repo/contacts.js';
import { toChannel, type CrmDeps, type Handler } from '../common.js';

export function listContactChannels(deps: CrmDeps): Handler<'listContactChannels'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const contact = await contacts.findContact(pool, ctx.tenant, req.contact_id);
    if (!contact) throw errors.notFound('contact', req.contact_id);
    return { data: (await channels.listChannels(pool, ctx.tenant, contact.id)).map(toChannel) };
  };
}
