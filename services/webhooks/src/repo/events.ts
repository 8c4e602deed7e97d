import { listPage, newestFirst, type KeysetPage, type PageQuery, type Queryable } from '@workauto/db';

export type EventStatus = 'pending' | 'delivered' | 'failed';

export interface EventRow {
  id: string;
  tenant_id: string;
  event_type: string;
  channels: string[];
  payload: string;
  status: EventStatus;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'e.id, e.tenant_id, e.event_type, e.channels, e.payload, e.status, e.created_at, e.updated_at';

/** Records the event once (a redelivered domain event is a no-op); true if it was new. */
export async function insertEvent(db: Queryable, row: Pick<EventRow, 'id' | 'tenant_id' | 'event_type' | 'channels' | 'payload'>): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO webhook_events (id, tenant_id, event_type, channels, payload) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
    [row.id, row.tenant_id, row.event_type, row.channels, row.payload],
  );
  return rowCount === 1;
}

export async function findEvent(db: Queryable, tenantId: string, id: string, opts: { forUpdate?: boolean } = {}): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>(`SELECT ${COLUMNS} FROM webhook_events e WHERE e.tenant_id = $1 AND e.id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`, [tenantId, id]);
  return rows[0];
}

export function listEvents(db: Queryable, tenantId: string, filter: { eventType?: string | undefined; status?: EventStatus | undefined; endpointId?: string | undefined }, page: PageQuery): Promise<KeysetPage<EventRow>> {
  const params: unknown[] = [tenantId];
  const where = ['e.tenant_id = $1'];
  if (filter.eventType) where.push(`e.event_type = $${params.push(filter.eventType)}`);
  if (filter.status) where.push(`e.status = $${params.push(filter.status)}`);
  if (filter.endpointId) where.push(`EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.endpoint_id = $${params.push(filter.endpointId)})`);
  return listPage<EventRow>(db, { columns: COLUMNS, from: 'webhook_events e', where: where.join(' AND '), params, order: newestFirst('e') }, page);
}

/**
 * Re-derives the events' status from their deliveries: pending while one is due, else failed if
 * one failed for good, else delivered.
 */
export async function refreshStatus(db: Queryable, eventIds: readonly string[]): Promise<void> {
  if (!eventIds.length) return;
  await db.query(
    `UPDATE webhook_events e SET status = s.status, updated_at = now()
       FROM (SELECT event_id, CASE WHEN bool_or(status = 'pending') THEN 'pending' WHEN bool_or(status = 'failed') THEN 'failed' ELSE 'delivered' END AS status
               FROM webhook_deliveries WHERE event_id = ANY($1::uuid[]) GROUP BY event_id) s
      WHERE e.id = s.event_id AND e.status IS DISTINCT FROM s.status`,
    [eventIds],
  );
}

/** Events older than the retention go, with their deliveries and attempts. */
export async function deleteOlderThan(db: Queryable, days: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM webhook_events WHERE id IN (SELECT id FROM webhook_events WHERE created_at < now() - $1 * interval '1 day' LIMIT 10000)`,
    [days],
  );
  return rowCount ?? 0;
}
