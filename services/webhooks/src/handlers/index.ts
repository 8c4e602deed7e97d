import type { Handlers } from '@workauto/grpc';
import type { WebhooksServiceService } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import type { WebhooksDeps } from './common.js';
import { endpointHandlers } from './endpoints.js';
import { eventHandlers } from './events.js';

export type { WebhooksDeps } from './common.js';

/** Every rpc of WebhooksService; each area's handlers live in the file of its name. */
export function webhooksHandlers(deps: WebhooksDeps): Handlers<typeof WebhooksServiceService> {
  return { ...endpointHandlers(deps), ...eventHandlers(deps) };
}
