import { errors } from '@workauto/grpc';
import * as contacts from '../../repo/contacts.js';
import { toContact, type CrmDeps, type Handler } from '../common.js';

export function getContact(deps: CrmDeps): Handler<'getContact'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const row = await contacts.findContact(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('contact', req.id);
    return toContact(row);
  };
}
