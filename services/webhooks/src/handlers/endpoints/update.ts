import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { changedFields, patchNulls, textOrNull, validate } from '@workauto/grpc';
import { failPending } from '../../delivery/endpoint-state.js';
import * as endpoints from '../../repo/endpoints.js';
import { endpointData, SOURCE, toEndpoint, type WebhooksDeps, type Handler } from '../common.js';
import { checkFilter, fullUrl, lockEndpoint } from './common.js';

export function updateWebhookEndpoint({ pool, egress }: WebhooksDeps): Handler<'updateWebhookEndpoint'> {
  return async (patchRequest, ctx) => {
    const v = validate();
    const { req } = patchNulls(patchRequest, { text: ['description'] }, v);
    const mask = new Set(req.update_mask ?? []);
    if (req.url !== undefined) egress.checkUrl(req.url, 'url');
    const url = req.url;
    // Repeated fields have no presence: the mask says whether the body carried them (null clears).
    const eventTypes = mask.has('event_types') ? checkFilter(v, 'event_types', req.event_types) : undefined;
    const channels = mask.has('channels') ? checkFilter(v, 'channels', req.channels) : undefined;
    v.done();
    return withTransaction(
      pool,
      async (tx) => {
        const current = await lockEndpoint(tx, ctx.tenant, req.id);
        const patch: endpoints.EndpointPatch = {
          url,
          description: textOrNull(req.description),
          event_types: eventTypes,
          channels,
          metadata: req.metadata,
        };
        if (req.is_enabled === false && current.is_enabled) {
          Object.assign(patch, { is_enabled: false, disabled_at: new Date(), disabled_reason: 'disabled by a user' });
        } else if (req.is_enabled === true) {
          // Enabled again: a fresh start, the failure streak forgotten.
          Object.assign(patch, { is_enabled: true, disabled_at: null, disabled_reason: null, failing_since: null });
        }
        const row = await endpoints.updateEndpoint(tx, ctx.tenant, current.id, patch);
        if (!row.is_enabled && current.is_enabled) await failPending(tx, ctx.tenant, row.id);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'webhook_endpoint.updated',
          resourceType: 'webhook_endpoint',
          resourceId: row.id,
          data: endpointData(row),
          metadata: changedFields({
            url,
            description: patch.description,
            event_types: eventTypes,
            channels,
            metadata: req.metadata,
            is_enabled: req.is_enabled,
          }),
        });
        return toEndpoint(row, { fullUrl: fullUrl(ctx) });
      },
      { signal: ctx.signal },
    );
  };
}
