/**
 * Intake: the domain-events consumer. In the consumer's transaction (one per batch, with dedup on
 * the event id) it records the webhook event and one delivery job per matching enabled endpoint.
 */
import type { PoolClient, Queryable } from '@workauto/db';
import { newId } from '@workauto/db';
import type { EnqueueOptions } from '@workauto/jobs';
import type { ConsumedEvent } from '@workauto/events';
import { matches } from '../domain/filters.js';
import { type WebhooksDeps } from '../handlers/common.js';
import * as deliveries from '../repo/deliveries.js';
import * as endpoints from '../repo/endpoints.js';
import * as events from '../repo/events.js';

export const INTAKE_GROUP = 'webhooks.intake';

/** The body every delivery of the event carries: data is the resource as the REST API returns it (data_json, not re-mapped). */
function webhookBody(event: Pick<ConsumedEvent, 'type' | 'occurred_at' | 'data'>): string {
  return JSON.stringify({
    type: event.type,
    timestamp: (event.occurred_at ?? new Date()).toISOString(),
    data: event.data ?? null,
  });
}

/**
 * The events of a batch that may have a delivery: those of tenants with an enabled endpoint. The
 * rest (most events: most tenants have no endpoint) are skipped without a transaction or a
 * processed_events row; takeIn would record nothing for them either.
 */
export async function worthTakingIn(db: Queryable, batch: ConsumedEvent[]): Promise<Set<string>> {
  const tenants = [...new Set(batch.flatMap((e) => (e.tenant_id ? [e.tenant_id] : [])))];
  const withEndpoints = tenants.length ? await endpoints.tenantsWithEndpoints(db, tenants) : new Set<string>();
  return new Set(batch.filter((e) => e.tenant_id && withEndpoints.has(e.tenant_id)).map((e) => e.id));
}

export async function takeIn(
  deps: Pick<WebhooksDeps, 'queue' | 'settings'>,
  tx: PoolClient,
  event: ConsumedEvent,
): Promise<void> {
  if (!event.tenant_id) return;
  const matched = (await endpoints.enabledEndpoints(tx, event.tenant_id)).filter((e) => matches(e, event));
  if (!matched.length) return;
  const fresh = await events.insertEvent(tx, {
    id: event.id,
    tenant_id: event.tenant_id,
    event_type: event.type,
    channels: event.channels,
    payload: webhookBody(event),
  });
  if (!fresh) return;
  const deliveryIds = matched.map(() => newId());
  const jobIds = await deps.queue.enqueueMany(
    tx,
    matched.map((endpoint, i) => ({
      payload: { delivery_id: deliveryIds[i]! },
      options: jobOptions(deps, event.tenant_id, endpoint.id),
    })),
  );
  await deliveries.insertDeliveries(
    tx,
    event.tenant_id,
    event.id,
    matched.map((endpoint, i) => ({ id: deliveryIds[i]!, endpoint_id: endpoint.id, job_id: jobIds[i]! })),
  );
}

/**
 * A delivery's job: keyed by its endpoint (the per-endpoint cap) and grouped by its tenant (the
 * per-tenant cap: one tenant's slow receivers cannot take every replica's slots), on a fresh schedule. A few
 * attempts beyond the schedule: one taken back from a dead worker counts as an attempt, and the
 * handler (not the queue) decides when the schedule is over.
 */
function jobOptions(deps: Pick<WebhooksDeps, 'settings'>, tenantId: string, endpointId: string): EnqueueOptions {
  return { key: endpointId, group: tenantId, maxAttempts: deps.settings.retrySchedule.length + 3 };
}

/** The job that attempts a delivery again (a retry), due now. */
export function deliveryJob(
  deps: Pick<WebhooksDeps, 'queue' | 'settings'>,
  tx: PoolClient,
  tenantId: string,
  deliveryId: string,
  endpointId: string,
): Promise<string> {
  return deps.queue.enqueue(tx, { delivery_id: deliveryId }, jobOptions(deps, tenantId, endpointId));
}
