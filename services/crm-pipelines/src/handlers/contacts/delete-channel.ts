import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as channels from '../../repo/channels.js';
import { SOURCE, channelData, type CrmDeps, type Handler } from '../common.js';
import { lockContact } from './common.js';

export function deleteContactChannel(deps: CrmDeps): Handler<'deleteContactChannel'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const contact = await lockContact(tx, tenantId, req.contact_id);
        const current = await channels.findChannel(tx, tenantId, contact.id, req.channel_id);
        if (!current) throw errors.notFound('contact_channel', req.channel_id);
        const deleted = await channels.updateChannel(tx, tenantId, current.id, {
          deleted_at: new Date(),
          is_primary: false,
        });
        const rest = await channels.listChannels(tx, tenantId, contact.id, current.type);
        await channels.setPreferenceOrder(
          tx,
          tenantId,
          rest.map((c) => c.id),
        );
        if (current.is_primary && rest[0]) {
          // The type keeps a primary: the next channel by preference.
          const promoted = await channels.updateChannel(tx, tenantId, rest[0].id, { is_primary: true });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact_channel.updated',
            resourceType: 'contact_channel',
            resourceId: promoted.id,
            parent: { type: 'contact', id: promoted.contact_id },
            data: channelData(promoted),
            metadata: { is_primary: true },
          });
        }
        await recordEvent(tx, SOURCE, ctx, {
          type: 'contact_channel.deleted',
          resourceType: 'contact_channel',
          resourceId: deleted.id,
          parent: { type: 'contact', id: deleted.contact_id },
          data: channelData(deleted),
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
