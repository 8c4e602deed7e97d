/** Turning an endpoint off, the one way: by a user (PATCH, DELETE) or by the service (410, failure streak). */
import type { PoolClient } from '@workauto/db';
import { recordEvent, type EventContext } from '@workauto/events';
import { endpointData, SOURCE } from '../handlers/common.js';
import * as deliveries from '../repo/deliveries.js';
import * as endpoints from '../repo/endpoints.js';

/** Who acts when the service itself disables an endpoint (audit actor `system`). */
const systemContext = (tenantId: string): EventContext => ({
  tenantId,
  requestId: 'webhooks-delivery',
  actor: { type: 'system', id: 'system' },
});

/** Its pending deliveries fail (a disabled or deleted endpoint gets nothing more). */
export async function failPending(tx: PoolClient, tenantId: string, endpointId: string): Promise<void> {
  await deliveries.failPendingOf(tx, tenantId, endpointId);
}

/**
 * The service disables an endpoint (410 Gone, or the failure streak): reason recorded, pending
 * deliveries failed, `webhook_endpoint.disabled` emitted (audit and domain event). No-op if it is
 * already disabled or gone.
 */
export async function disableBySystem(
  tx: PoolClient,
  tenantId: string,
  endpointId: string,
  reason: string,
): Promise<boolean> {
  const current = await endpoints.findEndpoint(tx, tenantId, endpointId, { forUpdate: true });
  if (!current || !current.is_enabled) return false;
  const row = await endpoints.updateEndpoint(tx, tenantId, endpointId, {
    is_enabled: false,
    disabled_at: new Date(),
    disabled_reason: reason,
  });
  await failPending(tx, tenantId, endpointId);
  await recordEvent(tx, SOURCE, systemContext(tenantId), {
    type: 'webhook_endpoint.disabled',
    resourceType: 'webhook_endpoint',
    resourceId: row.id,
    data: endpointData(row),
    metadata: { disabled_reason: reason },
  });
  return true;
}
