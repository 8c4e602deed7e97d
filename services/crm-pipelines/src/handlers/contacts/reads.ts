import { errors, parsePage, toPage } from '@workauto/grpc';
import * as channels from '../../repo/channels.js';
import * as contacts from '../../repo/contacts.js';
import { toChannel, toContact, type CrmDeps, type Handler } from '../common.js';

export function listContacts(deps: CrmDeps): Handler<'listContacts'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const page = parsePage(req);
    const q = req.q?.trim() || undefined;
    return toPage(await contacts.listContacts(pool, ctx.tenant, q, page), toContact);
  };
}

export function getContact(deps: CrmDeps): Handler<'getContact'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const row = await contacts.findContact(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('contact', req.id);
    return toContact(row);
  };
}

export function listContactChannels(deps: CrmDeps): Handler<'listContactChannels'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const contact = await contacts.findContact(pool, ctx.tenant, req.contact_id);
    if (!contact) throw errors.notFound('contact', req.contact_id);
    return { data: (await channels.listChannels(pool, ctx.tenant, contact.id)).map(toChannel) };
  };
}
