import { withTransaction } from '@workauto/db';
import { errors, validate, patchNulls, changedFields, textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { moveTo } from '../../domain/ordering.js';
import * as channels from '../../repo/channels.js';
import { SOURCE, toChannel, channelData, type CrmDeps, type Handler } from '../common.js';
import { canonicalOrThrow, uniqueValue, lockContact, demote } from './common.js';

export function updateContactChannel(deps: CrmDeps): Handler<'updateContactChannel'> {
  const { pool } = deps;
  return async (patchRequest, ctx) => {
    const v = validate();
    const { req } = patchNulls(patchRequest, { text: ['label'], other: ['region'] }, v);
    v.check(req.region === undefined || req.value !== undefined, 'region', 'is used only together with value');
    v.done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const contact = await lockContact(tx, tenantId, req.contact_id);
        const current = await channels.findChannel(tx, tenantId, contact.id, req.channel_id);
        if (!current) throw errors.notFound('contact_channel', req.channel_id);
        if (req.is_primary === false && current.is_primary) {
          throw errors.failedPrecondition(
            'PRIMARY_CHANNEL_REQUIRED',
            `a contact keeps one primary ${current.type} channel: make another one primary instead`,
          );
        }
        const canonical = req.value === undefined ? undefined : canonicalOrThrow(current.type, req.value, req.region);
        // A new address is not verified, whatever the old one was; the same address rewritten keeps its state.
        const newAddress = canonical !== undefined && canonical.canonical !== current.canonical_value;
        const promote = req.is_primary === true && !current.is_primary;
        if (promote) await demote(tx, ctx, tenantId, contact.id, current.type);
        if (req.preference_order !== undefined) {
          const ids = (await channels.listChannels(tx, tenantId, contact.id, current.type)).map((c) => c.id);
          await channels.setPreferenceOrder(tx, tenantId, moveTo(ids, current.id, req.preference_order));
        }
        const patch = {
          value: req.value?.trim(),
          canonical_value: canonical?.canonical,
          key_version: canonical?.keyVersion,
          label: textOrNull(req.label),
          is_primary: promote ? true : undefined,
          is_verified: req.is_verified ?? (newAddress ? false : undefined),
          metadata: req.metadata,
        };
        const updated = await uniqueValue(current.type, canonical?.canonical ?? current.canonical_value, () =>
          channels.updateChannel(tx, tenantId, current.id, patch),
        );
        await recordEvent(tx, SOURCE, ctx, {
          type: 'contact_channel.updated',
          resourceType: 'contact_channel',
          resourceId: updated.id,
          parent: { type: 'contact', id: updated.contact_id },
          data: channelData(updated),
          metadata: changedFields({ ...patch, preference_order: req.preference_order }),
        });
        return toChannel(updated);
      },
      { signal: ctx.signal },
    );
  };
}
