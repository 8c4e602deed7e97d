import { parsePage, toPage } from '@workauto/grpc';
import * as endpoints from '../../repo/endpoints.js';
import { toEndpoint, type WebhooksDeps, type Handler } from '../common.js';
import { fullUrl } from './common.js';

export function listWebhookEndpoints({ pool }: WebhooksDeps): Handler<'listWebhookEndpoints'> {
  return async (req, ctx) => {
    return toPage(await endpoints.listEndpoints(pool, ctx.tenant, parsePage(req)), (r) =>
      toEndpoint(r, { fullUrl: fullUrl(ctx) }),
    );
  };
}
