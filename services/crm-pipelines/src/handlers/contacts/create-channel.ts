import { newId, withTransaction } from '@workauto/db';
import { errors, textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { type ChannelType } from '../../domain/channels.js';
import { moveTo } from '../../domain/ordering.js';
import * as channels from '../../repo/channels.js';
import { LIMITS, SOURCE, channelTypes, toChannel, channelData, type CrmDeps, type Handler } from '../common.js';
import { canonicalOrThrow, uniqueValue, lockContact, demote } from './common.js';

export function createContactChannel(deps: CrmDeps): Handler<'createContactChannel'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const type = channelTypes.toDomain(req.type) as ChannelType;
    const canonical = canonicalOrThrow(type, req.value, req.region);
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        // The contact's row lock serialises every change to its channels (primary flag, order).
        const contact = await lockContact(tx, tenantId, req.contact_id);
        const all = await channels.listChannels(tx, tenantId, contact.id);
        if (all.length >= LIMITS.channelsPerContact)
          throw errors.failedPrecondition(
            'TOO_MANY_CHANNELS',
            `a contact has at most ${LIMITS.channelsPerContact} channels`,
          );
        const siblings = all.filter((c) => c.type === type);
        // The first channel of a type is its primary; a later one only when asked.
        const isPrimary = siblings.length === 0 || req.is_primary === true;
        if (isPrimary && siblings.length > 0) await demote(tx, ctx, tenantId, contact.id, type);
        let row = await uniqueValue(type, canonical.canonical, () =>
          channels.insertChannel(tx, {
            id: newId(),
            tenant_id: tenantId,
            contact_id: contact.id,
            type,
            value: req.value.trim(),
            canonical_value: canonical.canonical,
            key_version: canonical.keyVersion,
            label: textOrNull(req.label) ?? null,
            is_primary: isPrimary,
            is_verified: req.is_verified ?? false,
            preference_order: siblings.length + 1,
            metadata: req.metadata ?? {},
          }),
        );
        if (req.preference_order !== undefined && req.preference_order <= siblings.length) {
          await channels.setPreferenceOrder(
            tx,
            tenantId,
            moveTo([...siblings.map((c) => c.id), row.id], row.id, req.preference_order),
          );
          row = (await channels.findChannel(tx, tenantId, contact.id, row.id))!;
        }
        await recordEvent(tx, SOURCE, ctx, {
          type: 'contact_channel.created',
          resourceType: 'contact_channel',
          resourceId: row.id,
          parent: { type: 'contact', id: row.contact_id },
          data: channelData(row),
        });
        return toChannel(row);
      },
      { signal: ctx.signal },
    );
  };
}
