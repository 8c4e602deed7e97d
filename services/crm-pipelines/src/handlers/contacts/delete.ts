import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import * as channels from '../../repo/channels.js';
import * as contacts from '../../repo/contacts.js';
import { SOURCE, channelData, contactData, type CrmDeps, type Handler } from '../common.js';
import { lockContact } from './common.js';

export function deleteContact(deps: CrmDeps): Handler<'deleteContact'> {
  const { pool } = deps;
  return async (req, ctx) => {
    return withTransaction(
      pool,
      async (tx) => {
        const current = await lockContact(tx, ctx.tenant, req.id);
        // Its channels go with it, so their values can be used by another contact.
        for (const ch of await channels.deleteChannelsOf(tx, ctx.tenant, current.id)) {
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact_channel.deleted',
            resourceType: 'contact_channel',
            resourceId: ch.id,
            parent: { type: 'contact', id: ch.contact_id },
            data: channelData(ch),
          });
        }
        const deleted = await contacts.updateContact(tx, ctx.tenant, current.id, { deleted_at: new Date() });
        await recordEvent(tx, SOURCE, ctx, {
          type: 'contact.deleted',
          resourceType: 'contact',
          resourceId: deleted.id,
          data: contactData(deleted),
          metadata: { deleted_at: deleted.deleted_at },
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
