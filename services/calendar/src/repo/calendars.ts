import {
  listPage,
  newestFirst,
  updateTenantRow,
  type Columns,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';

export interface CalendarRow {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  timezone: string;
  color: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export const COLUMNS =
  'id, tenant_id, name, description, timezone, color, metadata, created_at, updated_at, deleted_at';

export async function insertCalendar(
  db: Queryable,
  c: Pick<CalendarRow, 'id' | 'tenant_id' | 'name' | 'description' | 'timezone' | 'color' | 'metadata'>,
): Promise<CalendarRow> {
  const { rows } = await db.query<CalendarRow>(
    `INSERT INTO calendars (id, tenant_id, name, description, timezone, color, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
    [c.id, c.tenant_id, c.name, c.description, c.timezone, c.color, c.metadata],
  );
  return rows[0]!;
}

/**
 * A live calendar of the tenant. `lock`: 'update' for changes of the calendar itself, 'share'
 * (KEY SHARE) for changes of its events, so a calendar delete waits for them and they for it.
 */
export async function findCalendar(
  db: Queryable,
  tenantId: string,
  id: string,
  lock?: 'update' | 'share',
): Promise<CalendarRow | undefined> {
  const suffix = lock === 'update' ? ' FOR UPDATE' : lock === 'share' ? ' FOR KEY SHARE' : '';
  const { rows } = await db.query<CalendarRow>(
    `SELECT ${COLUMNS} FROM calendars WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL${suffix}`,
    [tenantId, id],
  );
  return rows[0];
}

export async function listCalendars(
  db: Queryable,
  tenantId: string,
  page: PageQuery,
): Promise<KeysetPage<CalendarRow>> {
  return listPage<CalendarRow>(
    db,
    {
      columns: COLUMNS,
      from: 'calendars c',
      where: 'c.tenant_id = $1 AND c.deleted_at IS NULL',
      params: [tenantId],
      order: newestFirst('c'),
    },
    page,
  );
}

export type CalendarPatch = Partial<Pick<CalendarRow, 'name' | 'description' | 'timezone' | 'color' | 'metadata'>>;
const PATCH: Columns<CalendarPatch> = { name: true, description: true, timezone: true, color: true, metadata: true };

export async function updateCalendar(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: CalendarPatch,
): Promise<CalendarRow> {
  return (await updateTenantRow<CalendarRow>(db, 'calendars', COLUMNS, tenantId, id, patch, PATCH))!;
}

export async function softDeleteCalendar(db: Queryable, tenantId: string, id: string): Promise<CalendarRow> {
  const { rows } = await db.query<CalendarRow>(
    `UPDATE calendars SET deleted_at = now(), updated_at = now() WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, id],
  );
  return rows[0]!;
}
