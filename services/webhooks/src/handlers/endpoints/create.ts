import { newId, withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { errors, textOrNull, validate } from '@workauto/grpc';
import { newSigningSecret } from '../../domain/signing.js';
import * as endpoints from '../../repo/endpoints.js';
import * as secrets from '../../repo/secrets.js';
import { endpointData, secretContext, SOURCE, toEndpoint, type WebhooksDeps, type Handler } from '../common.js';
import { checkFilter, fullUrl } from './common.js';

function endpointLimitReached(max: number) {
  return errors.failedPrecondition(
    'WEBHOOK_ENDPOINT_LIMIT_REACHED',
    `this tenant has reached its limit of ${max} webhook endpoints (enabled and disabled ones count); delete one you no longer use (DELETE /api/v1/webhook-endpoints/{id}), or, when self-hosting, raise WEBHOOK_MAX_ENDPOINTS`,
  );
}

export function createWebhookEndpoint({
  pool,
  keyring,
  egress,
  settings,
}: WebhooksDeps): Handler<'createWebhookEndpoint'> {
  return async (req, ctx) => {
    if (!req.url) throw errors.invalidField('url', 'is required: the https URL that receives the deliveries');
    // Stored as written (whitespace is refused, not trimmed): every connection checks it again (libs/egress).
    egress.checkUrl(req.url, 'url');
    const url = req.url;
    const v = validate();
    const eventTypes = checkFilter(v, 'event_types', req.event_types);
    const channels = checkFilter(v, 'channels', req.channels);
    v.done();
    const secret = newSigningSecret();
    return withTransaction(
      pool,
      async (tx) => {
        if ((await endpoints.lockAndCountLive(tx, ctx.tenant)) >= settings.maxEndpoints)
          throw endpointLimitReached(settings.maxEndpoints);
        const row = await endpoints.insertEndpoint(tx, {
          id: newId(),
          tenant_id: ctx.tenant,
          url,
          description: textOrNull(req.description) ?? null,
          event_types: eventTypes,
          channels,
          metadata: req.metadata ?? {},
        });
        await secrets.rotateSecret(
          tx,
          ctx.tenant,
          row.id,
          keyring.encrypt(secret, secretContext(ctx.tenant, row.id)),
          0,
        );
        await recordEvent(tx, SOURCE, ctx, {
          type: 'webhook_endpoint.created',
          resourceType: 'webhook_endpoint',
          resourceId: row.id,
          data: endpointData(row),
        });
        return toEndpoint(row, { signingSecret: secret, fullUrl: fullUrl(ctx) });
      },
      { signal: ctx.signal },
    );
  };
}
