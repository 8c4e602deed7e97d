import { errors } from '@workauto/grpc';
import * as endpoints from '../../repo/endpoints.js';
import { toEndpoint, type WebhooksDeps, type Handler } from '../common.js';
import { fullUrl } from './common.js';

export function getWebhookEndpoint({ pool }: WebhooksDeps): Handler<'getWebhookEndpoint'> {
  return async (req, ctx) => {
    const row = await endpoints.findEndpoint(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('webhook_endpoint', req.id);
    return toEndpoint(row, { fullUrl: fullUrl(ctx) });
  };
}
