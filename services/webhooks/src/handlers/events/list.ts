import { parsePage, toPage } from '@workauto/grpc';
import * as events from '../../repo/events.js';
import { readableResourceTypes, urlView } from '../../domain/visibility.js';
import { toEvent, type WebhooksDeps, type Handler } from '../common.js';

export function listWebhookEvents({ pool }: WebhooksDeps): Handler<'listWebhookEvents'> {
  return async (req, ctx) => {
    const filter = {
      eventType: req.event_type || undefined,
      status: (req.status || undefined) as events.EventStatus | undefined,
      endpointId: req.endpoint_id || undefined,
      readableTypes: readableResourceTypes(ctx),
    };
    const view = urlView(ctx);
    return toPage(await events.listEvents(pool, ctx.tenant, filter, parsePage(req)), (row) => toEvent(row, view));
  };
}
