import { withTransaction } from '@workauto/db';
import { validate, patchNulls, changedFields, textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as contacts from '../../repo/contacts.js';
import { SOURCE, toContact, contactData, type CrmDeps, type Handler } from '../common.js';
import { lockContact } from './common.js';

export function updateContact(deps: CrmDeps): Handler<'updateContact'> {
  const { pool } = deps;
  return async (patchRequest, ctx) => {
    const v = validate();
    const { req } = patchNulls(patchRequest, { text: ['company', 'job_title'] }, v);
    v.done();
    return withTransaction(
      pool,
      async (tx) => {
        const current = await lockContact(tx, ctx.tenant, req.id);
        const patch = {
          name: req.name?.trim(),
          company: textOrNull(req.company),
          job_title: textOrNull(req.job_title),
          metadata: req.metadata,
        };
        const updated = await contacts.updateContact(tx, ctx.tenant, current.id, patch);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'contact.updated',
          resourceType: 'contact',
          resourceId: updated.id,
          data: contactData(updated),
          metadata: changedFields(patch),
        });
        return toContact(updated);
      },
      { signal: ctx.signal },
    );
  };
}
