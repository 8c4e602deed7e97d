import * as deliveries from '../../repo/deliveries.js';
import { urlView } from '../../domain/visibility.js';
import { toEventDetail, type WebhooksDeps, type Handler } from '../common.js';
import { findReadable } from './common.js';

export function getWebhookEvent({ pool }: WebhooksDeps): Handler<'getWebhookEvent'> {
  return async (req, ctx) => {
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
  };
}
