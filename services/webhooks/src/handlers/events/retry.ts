import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { deliveryJob } from '../../delivery/intake.js';
import * as deliveries from '../../repo/deliveries.js';
import * as events from '../../repo/events.js';
import { eventData, SOURCE, type WebhooksDeps, type Handler } from '../common.js';
import { findReadable } from './common.js';

export function retryWebhookEvent(deps: WebhooksDeps): Handler<'retryWebhookEvent'> {
  const { pool } = deps;
  return async (req, ctx) => {
    return withTransaction(
      pool,
      async (tx) => {
        const event = await findReadable(tx, ctx, req.id);
        const failed = await deliveries.retryableOf(tx, ctx.tenant, event.id);
        for (const d of failed)
          await deliveries.requeue(tx, d.id, await deliveryJob(deps, tx, ctx.tenant, d.id, d.endpoint_id));
        if (failed.length) {
          const row = (await events.findEvent(tx, ctx.tenant, event.id, undefined))!;
          await recordEvent(tx, SOURCE, ctx, {
            type: 'webhook_event.retried',
            resourceType: 'webhook_event',
            resourceId: row.id,
            data: eventData(row),
            metadata: { requeued: failed.length },
          });
        }
        return { requeued: failed.length };
      },
      { signal: ctx.signal },
    );
  };
}
