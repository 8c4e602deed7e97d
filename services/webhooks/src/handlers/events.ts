import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { errors, parsePage, toPage, type CallContext, type Handlers } from '@workauto/grpc';
import type { WebhooksServiceService } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { deliveryJob } from '../delivery/intake.js';
import * as deliveries from '../repo/deliveries.js';
import * as events from '../repo/events.js';
import { readableResourceTypes, urlView } from '../domain/visibility.js';
import { eventData, SOURCE, toEvent, toEventDetail, type WebhooksDeps } from './common.js';

type H = Handlers<typeof WebhooksServiceService>;

export function eventHandlers(
  deps: WebhooksDeps,
): Pick<H, 'listWebhookEvents' | 'getWebhookEvent' | 'retryWebhookEvent'> {
  const { pool } = deps;
  return {
    async listWebhookEvents(req, ctx) {
      const filter = {
        eventType: req.event_type || undefined,
        status: (req.status || undefined) as events.EventStatus | undefined,
        endpointId: req.endpoint_id || undefined,
        readableTypes: readableResourceTypes(ctx),
      };
      const view = urlView(ctx);
      return toPage(await events.listEvents(pool, ctx.tenant, filter, parsePage(req)), (row) => toEvent(row, view));
    },

    async getWebhookEvent(req, ctx) {
      const row = await findReadable(pool, ctx, req.id);
      const list = await deliveries.deliveriesOf(pool, ctx.tenant, row.id);
      return toEventDetail(
        row,
        list,
        await deliveries.attemptsOf(
          pool,
          ctx.tenant,
          list.map((d) => d.id),
        ),
        urlView(ctx),
      );
    },

    async retryWebhookEvent(req, ctx) {
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
    },
  };
}

/** An event the caller may read (its domains, domain/visibility.ts); any other is a 404, as another tenant's. */
async function findReadable(db: Parameters<typeof events.findEvent>[0], ctx: CallContext, id: string) {
  const row = await events.findEvent(db, ctx.tenant, id, readableResourceTypes(ctx));
  if (!row) throw errors.notFound('webhook_event', id);
  return row;
}
