/**
 * Intake: the domain-events consumer. In the consumer's transaction (one per batch, with dedup on
 * the event id) it records the webhook event and one delivery job per matching enabled endpoint.
 */
import type { PoolClient } from '@workauto/db';
import { newId } from '@workauto/db';
import type { ConsumedEvent } from '@workauto/events';
import { matches } from '../domain/filters.js';
import { type WebhooksDeps } from '../handlers/common.js';
import * as deliveries from '../repo/deliveries.js';
import * as endpoints from '../repo/endpoints.js';
import * as events from '../repo/events.js';

export const INTAKE_GROUP = 'webhooks.intake';

/** The body every delivery of the event carries: data is the resource as the REST API returns it (data_json, not re-mapped). */
export function webhookBody(event: Pick<ConsumedEvent, 'type' | 'occurred_at' | 'data'>): string {
  return JSON.stringify({ type: event.type, timestamp: (event.occurred_at ?? new Date()).toISOString(), data: event.data ?? null });
}

export async function takeIn(deps: Pick<WebhooksDeps, 'queue' | 'settings'>, tx: PoolClient, event: ConsumedEvent): Promise<void> {
  if (!event.tenant_id) return;
  const matched = (await endpoints.enabledEndpoints(tx, event.tenant_id)).filter((e) => matches(e, event));
  if (!matched.length) return;
  const fresh = await events.insertEvent(tx, { id: event.id, tenant_id: event.tenant_id, event_type: event.type, channels: event.channels, payload: webhookBody(event) });
  if (!fresh) return;
  for (const endpoint of matched) {
    await enqueueDelivery(deps, tx, { tenantId: event.tenant_id, eventId: event.id, endpointId: endpoint.id });
  }
}

/** A new delivery of the event to the endpoint, and the job that attempts it (due now). */
async function enqueueDelivery(deps: Pick<WebhooksDeps, 'queue' | 'settings'>, tx: PoolClient, d: { tenantId: string; eventId: string; endpointId: string }): Promise<void> {
  const id = newId();
  const jobId = await deliveryJob(deps, tx, id, d.endpointId);
  await deliveries.insertDelivery(tx, { id, tenant_id: d.tenantId, event_id: d.eventId, endpoint_id: d.endpointId, job_id: jobId });
}

/**
 * The job that attempts a delivery on a fresh schedule. A few attempts beyond the schedule: one
 * taken back from a dead worker counts as an attempt, and the handler (not the queue) decides when
 * the schedule is over.
 */
export function deliveryJob(deps: Pick<WebhooksDeps, 'queue' | 'settings'>, tx: PoolClient, deliveryId: string, endpointId: string): Promise<string> {
  return deps.queue.enqueue(tx, { delivery_id: deliveryId }, { key: endpointId, maxAttempts: deps.settings.retrySchedule.length + 3 });
}
