import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { failPending } from '../../delivery/endpoint-state.js';
import * as endpoints from '../../repo/endpoints.js';
import { endpointData, SOURCE, type WebhooksDeps, type Handler } from '../common.js';
import { lockEndpoint } from './common.js';

export function deleteWebhookEndpoint({ pool }: WebhooksDeps): Handler<'deleteWebhookEndpoint'> {
  return async (req, ctx) => {
    return withTransaction(
      pool,
      async (tx) => {
        const current = await lockEndpoint(tx, ctx.tenant, req.id);
        const row = await endpoints.updateEndpoint(tx, ctx.tenant, current.id, { deleted_at: new Date() });
        await failPending(tx, ctx.tenant, row.id);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'webhook_endpoint.deleted',
          resourceType: 'webhook_endpoint',
          resourceId: row.id,
          data: endpointData(row),
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
