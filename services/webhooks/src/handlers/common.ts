import type { Keyring } from '@workauto/crypto';
import type { Pool } from '@workauto/db';
import { reducedUrl, type EgressPolicy } from '@workauto/egress';
import type { JobQueue } from '@workauto/jobs';
import { enumMapping, type Handlers } from '@workauto/grpc';
import { resourceJson } from '@workauto/protos';
import {
  WebhookAttemptTrigger,
  WebhookDeliveryStatus,
  WebhookEndpoint,
  WebhookEvent,
  WebhookEventStatus,
  type WebhookAttempt,
  type WebhookDelivery,
  type WebhookEventDetail,
  type WebhooksServiceService,
} from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import type { AttemptRow, DeliveryRow } from '../repo/deliveries.js';
import type { EndpointRow } from '../repo/endpoints.js';
import type { EventRow } from '../repo/events.js';
import type { WebhookSettings } from '../settings.js';
import { reducePayloadUrls, type UrlView } from '../domain/visibility.js';

export const SOURCE = 'webhooks';
const eventStatuses = enumMapping(WebhookEventStatus, 'WEBHOOK_EVENT_STATUS_');
const deliveryStatuses = enumMapping(WebhookDeliveryStatus, 'WEBHOOK_DELIVERY_STATUS_');
const triggers = enumMapping(WebhookAttemptTrigger, 'WEBHOOK_ATTEMPT_TRIGGER_');

/** A delivery job's payload (queue DELIVERY_QUEUE, key = the endpoint id). */
export interface DeliveryJob {
  delivery_id: string;
}
export const DELIVERY_QUEUE = 'webhook-deliveries';

export interface WebhooksDeps {
  pool: Pool;
  keyring: Keyring;
  egress: EgressPolicy;
  settings: WebhookSettings;
  queue: JobQueue<DeliveryJob>;
}

type H = Handlers<typeof WebhooksServiceService>;
/** The handler of one rpc; each lives in handlers/<resource>/<verb>.ts and index.ts assembles them. */
export type Handler<K extends keyof H> = H[K];

/** Secrets are encrypted bound to their endpoint: a ciphertext copied to another row does not decrypt. */
export const secretContext = (tenantId: string, endpointId: string) =>
  `webhook_endpoint_secret:${tenantId}:${endpointId}`;

/**
 * The endpoint as the API returns it; `fullUrl` false (callers below admin on webhooks) reduces its
 * url to scheme, host and port.
 */
export function toEndpoint(
  row: EndpointRow,
  opts: { signingSecret?: string; fullUrl: boolean; previousSecretExpiresAt?: Date | undefined },
): WebhookEndpoint {
  const { signingSecret, fullUrl, previousSecretExpiresAt } = opts;
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    url: fullUrl ? row.url : reducedUrl(row.url),
    description: row.description ?? undefined,
    event_types: row.event_types,
    channels: row.channels,
    metadata: row.metadata,
    is_enabled: row.is_enabled,
    disabled_at: row.disabled_at ?? undefined,
    disabled_reason: row.disabled_reason ?? undefined,
    signing_secret: signingSecret,
    created_at: row.created_at,
    updated_at: row.updated_at,
    previous_secret_expires_at: previousSecretExpiresAt,
  };
}

/** The event as the API returns it; `view` says which URLs of its payload the caller sees reduced (none: all full). */
export function toEvent(row: EventRow, view?: UrlView): WebhookEvent {
  const payload = JSON.parse(row.payload) as Record<string, unknown>;
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    event_type: row.event_type,
    channels: row.channels,
    payload: view ? reducePayloadUrls(payload, view, reducedUrl) : payload,
    status: eventStatuses.fromDomain(row.status),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function toAttempt(row: AttemptRow): WebhookAttempt {
  return {
    attempted_at: row.attempted_at,
    http_status: row.http_status ?? undefined,
    response_time_ms: row.response_time_ms ?? undefined,
    error_message: row.error_message ?? undefined,
    trigger: triggers.fromDomain(row.trigger),
  };
}

export function toEventDetail(
  row: EventRow,
  deliveries: DeliveryRow[],
  attempts: AttemptRow[],
  view: UrlView,
): WebhookEventDetail {
  const deliveryOut = (d: DeliveryRow): WebhookDelivery => ({
    id: d.id,
    endpoint_id: d.endpoint_id,
    status: deliveryStatuses.fromDomain(d.status),
    attempt_count: d.attempt_count,
    next_attempt_at: d.status === 'pending' ? (d.next_attempt_at ?? undefined) : undefined,
    attempts: attempts.filter((a) => a.delivery_id === d.id).map(toAttempt),
  });
  return { ...toEvent(row, view), deliveries: deliveries.map(deliveryOut) };
}

// Event data is the resource exactly as the REST API returns it (docs/events.md); never the secret.
export const endpointData = (row: EndpointRow) => resourceJson(WebhookEndpoint, toEndpoint(row, { fullUrl: true }));
export const eventData = (row: EventRow) => resourceJson(WebhookEvent, toEvent(row));
