import type { EventType } from './types.js';

/** Events of the webhooks service (docs/events.md § webhooks). */
export const WEBHOOKS_EVENT_TYPES: readonly EventType[] = [
  {
    name: 'webhook_endpoint.created',
    description: 'A webhook endpoint was created: POST /webhook-endpoints (never the signing secret)',
  },
  {
    name: 'webhook_endpoint.updated',
    description:
      'A webhook endpoint was updated: PATCH /webhook-endpoints/{id}, including enabling and disabling by a user',
  },
  { name: 'webhook_endpoint.deleted', description: 'A webhook endpoint was deleted: DELETE /webhook-endpoints/{id}' },
  {
    name: 'webhook_endpoint.secret_rotated',
    description:
      'A webhook endpoint got a new signing secret: POST /webhook-endpoints/{id}/rotate-secret (never the secret)',
  },
  {
    name: 'webhook_endpoint.disabled',
    description:
      'The service disabled a webhook endpoint: 410 Gone from the receiver, or no successful attempt for WEBHOOK_DISABLE_AFTER',
  },
  {
    name: 'webhook_event.retried',
    description: 'Failed deliveries of a webhook event were requeued: POST /webhook-events/{id}/retry',
  },
];
