import type { Handlers } from '@workauto/grpc';
import type { WebhooksServiceService } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import type { WebhooksDeps } from './common.js';
import { createWebhookEndpoint } from './endpoints/create.js';
import { deleteWebhookEndpoint } from './endpoints/delete.js';
import { getWebhookEndpoint } from './endpoints/get.js';
import { listWebhookEndpoints } from './endpoints/list.js';
import { rotateWebhookEndpointSecret } from './endpoints/rotate-secret.js';
import { testWebhookEndpoint } from './endpoints/send-test.js';
import { updateWebhookEndpoint } from './endpoints/update.js';
import { listWebhookEventTypes } from './event-types/list.js';
import { getWebhookEvent } from './events/get.js';
import { listWebhookEvents } from './events/list.js';
import { retryWebhookEvent } from './events/retry.js';

export type { WebhooksDeps } from './common.js';

/** Every rpc of WebhooksService, one file per rpc: handlers/<resource>/<verb>.ts. */
export function webhooksHandlers(deps: WebhooksDeps): Handlers<typeof WebhooksServiceService> {
  return {
    createWebhookEndpoint: createWebhookEndpoint(deps),
    listWebhookEndpoints: listWebhookEndpoints(deps),
    getWebhookEndpoint: getWebhookEndpoint(deps),
    updateWebhookEndpoint: updateWebhookEndpoint(deps),
    deleteWebhookEndpoint: deleteWebhookEndpoint(deps),
    rotateWebhookEndpointSecret: rotateWebhookEndpointSecret(deps),
    testWebhookEndpoint: testWebhookEndpoint(deps),
    listWebhookEventTypes: listWebhookEventTypes(),
    listWebhookEvents: listWebhookEvents(deps),
    getWebhookEvent: getWebhookEvent(deps),
    retryWebhookEvent: retryWebhookEvent(deps),
  };
}
