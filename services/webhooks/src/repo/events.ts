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

const COLUMNS = 'e.id, e.tenant_id, e.event_type, e.channels, e.payload, s.status, e.created_at, s.updated_at';
/**
 * The event with its status derived from its deliveries: pending while one is due, else failed if
 * one failed for good, else delivered; updated_at is its latest delivery change.
 */
const FROM = `webhook_events e CROSS JOIN LATERAL (
    SELECT CASE WHEN bool_or(d.status = 'pending') THEN 'pending' WHEN bool_or(d.status = 'failed') THEN 'failed' ELSE 'delivered' END AS status,
           greatest(e.created_at, max(d.updated_at)) AS updated_at
      FROM webhook_deliveries d WHERE d.event_id = e.id) s`;

/**
 * Events of the readable resource types only ($n: text[]); a retried event also needs the event it
 * retried (nested in its payload, possibly a retried one again) readable, at any depth.
 */
function readable(param: string): string {
  return `split_part(e.event_type, '.', 1) = ANY(${param}::text[])
    AND CASE WHEN e.event_type = 'webhook_event.retried' THEN NOT EXISTS (
      WITH RECURSIVE retried(doc) AS (
          SELECT e.payload::jsonb #> '{data,payload}'
        UNION ALL
          SELECT doc #> '{data,payload}' FROM retried WHERE doc ->> 'type' = 'webhook_event.retried')
      SELECT 1 FROM retried WHERE doc IS NOT NULL AND NOT coalesce(split_part(doc ->> 'type', '.', 1) = ANY(${param}::text[]), false))
    ELSE true END`;
}

/** Records the event once (a redelivered domain event is a no-op); true if it was new. */
export async function insertEvent(
  db: Queryable,
  row: Pick<EventRow, 'id' | 'tenant_id' | 'event_type' | 'channels' | 'payload'>,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO webhook_events (id, tenant_id, event_type, channels, payload) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
    [row.id, row.tenant_id, row.event_type, row.channels, row.payload],
  );
  return rowCount === 1;
}

/**
 * `readableTypes`: the resource types whose events the caller may read (domain/visibility.ts);
 * undefined reads every event.
 */
export async function findEvent(
  db: Queryable,
  tenantId: string,
  id: string,
  readableTypes: readonly string[] | undefined,
): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM ${FROM} WHERE e.tenant_id = $1 AND e.id = $2${readableTypes ? ` AND ${readable('$3')}` : ''}`,
    readableTypes ? [tenantId, id, readableTypes] : [tenantId, id],
  );
  return rows[0];
}

export function listEvents(
  db: Queryable,
  tenantId: string,
  filter: {
    eventType?: string | undefined;
    status?: EventStatus | undefined;
    endpointId?: string | undefined;
    /** As findEvent's readableTypes. */
    readableTypes?: readonly string[] | undefined;
  },
  page: PageQuery,
): Promise<KeysetPage<EventRow>> {
  const params: unknown[] = [tenantId];
  const where = ['e.tenant_id = $1'];
  if (filter.readableTypes) where.push(readable(`$${params.push(filter.readableTypes)}`));
  if (filter.eventType) where.push(`e.event_type = $${params.push(filter.eventType)}`);
  if (filter.status) where.push(`s.status = $${params.push(filter.status)}`);
  if (filter.endpointId)
    where.push(
      `EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.endpoint_id = $${params.push(filter.endpointId)})`,
    );
  return listPage<EventRow>(
    db,
    { columns: COLUMNS, from: FROM, where: where.join(' AND '), params, order: newestFirst('e') },
    page,
  );
}

/** Events one deleteOlderThan takes at most (one short transaction each). */
export const RETENTION_BATCH = 10_000;

/** Up to RETENTION_BATCH events older than the retention go, with their deliveries and attempts (ON DELETE CASCADE; jobs hold no key to them). */
export async function deleteOlderThan(db: Queryable, days: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM webhook_events WHERE id IN (SELECT id FROM webhook_events WHERE created_at < now() - $1 * interval '1 day' LIMIT $2)`,
    [days, RETENTION_BATCH],
  );
  return rowCount ?? 0;
}
