import { newId, withTransaction } from '@workauto/db';
import { textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as contacts from '../../repo/contacts.js';
import { SOURCE, toContact, contactData, type CrmDeps, type Handler } from '../common.js';

export function createContact(deps: CrmDeps): Handler<'createContact'> {
  const { pool } = deps;
  return async (req, ctx) => {
    return withTransaction(
      pool,
      async (tx) => {
        const row = await contacts.insertContact(tx, {
          id: newId(),
          tenant_id: ctx.tenant,
          name: req.name.trim(),
          company: textOrNull(req.company) ?? null,
          job_title: textOrNull(req.job_title) ?? null,
          metadata: req.metadata ?? {},
        });
        await recordEvent(tx, SOURCE, ctx, {
          type: 'contact.created',
          resourceType: 'contact',
          resourceId: row.id,
          data: contactData(row),
        });
        return toContact(row);
      },
      { signal: ctx.signal },
    );
  };
}
