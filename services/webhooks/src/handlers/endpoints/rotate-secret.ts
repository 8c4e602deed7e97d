import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { newSigningSecret } from '../../domain/signing.js';
import * as endpoints from '../../repo/endpoints.js';
import * as secrets from '../../repo/secrets.js';
import { endpointData, secretContext, SOURCE, toEndpoint, type WebhooksDeps, type Handler } from '../common.js';
import { fullUrl, lockEndpoint } from './common.js';

export function rotateWebhookEndpointSecret({
  pool,
  keyring,
  settings,
}: WebhooksDeps): Handler<'rotateWebhookEndpointSecret'> {
  return async (req, ctx) => {
    const secret = newSigningSecret();
    return withTransaction(
      pool,
      async (tx) => {
        const current = await lockEndpoint(tx, ctx.tenant, req.id);
        const previousExpiresAt = await secrets.rotateSecret(
          tx,
          ctx.tenant,
          current.id,
          keyring.encrypt(secret, secretContext(ctx.tenant, current.id)),
          settings.secretGraceMs,
        );
        const row = await endpoints.updateEndpoint(tx, ctx.tenant, current.id, {});
        await recordEvent(tx, SOURCE, ctx, {
          type: 'webhook_endpoint.secret_rotated',
          resourceType: 'webhook_endpoint',
          resourceId: row.id,
          data: endpointData(row),
          metadata: { previous_secret_expires_at: previousExpiresAt ?? null },
        });
        return toEndpoint(row, {
          signingSecret: secret,
          fullUrl: fullUrl(ctx),
          previousSecretExpiresAt: previousExpiresAt,
        });
      },
      { signal: ctx.signal },
    );
  };
}
