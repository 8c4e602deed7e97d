import { parsePage, toPage } from '@workauto/grpc';
import * as contacts from '../../repo/contacts.js';
import { toContact, type CrmDeps, type Handler } from '../common.js';

export function listContacts(deps: CrmDeps): Handler<'listContacts'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const page = parsePage(req);
    const q = req.q?.trim() || undefined;
    return toPage(await contacts.listContacts(pool, ctx.tenant, q, page), toContact);
  };
}
