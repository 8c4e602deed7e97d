import type { Queryable } from '@workauto/db';

export interface ReminderRow {
  method: 'popup' | 'email';
  minutes: number;
}

export interface EventRow {
  id: string;
  tenant_id: string;
  calendar_id: string;
  series_id: string | null;
  recurrence_id: Date | null;
  title: string;
  description: string | null;
  location: string | null;
  location_lat: number | null;
  location_lng: number | null;
  conference_url: string | null;
  color: string | null;
  event_type: string;
  status: string;
  availability: string;
  visibility: string;
  is_all_day: boolean;
  start_at: Date | null;
  end_at: Date | null;
  start_date: string | null;
  end_date: string | null;
  timezone: string;
  rrule: string | null;
  exdates: Date[];
  reminders: ReminderRow[];
  organizer_id: string | null;
  ical_uid: string;
  sequence: number;
  metadata: Record<string, unknown>;
  span_start: Date;
  span_end: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/** The columns a write sets (everything but the timestamps the database keeps). */
export type EventFields = Omit<EventRow, 'created_at' | 'updated_at' | 'deleted_at'>;

const COLUMNS = `id, tenant_id, calendar_id, series_id, recurrence_id, title, description, location, location_lat, location_lng,
  conference_url, color, event_type, status, availability, visibility, is_all_day, start_at, end_at,
  start_date::text AS start_date, end_date::text AS end_date, timezone, rrule, exdates, reminders, organizer_id, ical_uid,
  sequence, metadata, span_start, span_end, created_at, updated_at, deleted_at`;

const WRITABLE = [
  'calendar_id', 'series_id', 'recurrence_id', 'title', 'description', 'location', 'location_lat', 'location_lng', 'conference_url', 'color',
  'event_type', 'status', 'availability', 'visibility', 'is_all_day', 'start_at', 'end_at', 'start_date', 'end_date', 'timezone', 'rrule',
  'exdates', 'reminders', 'organizer_id', 'ical_uid', 'sequence', 'metadata', 'span_start', 'span_end',
] as const;
type Writable = (typeof WRITABLE)[number];

/** jsonb columns get JSON text (node-postgres would send a JS array as a PostgreSQL array). */
const param = (column: string, value: unknown) => (column === 'reminders' || column === 'metadata' ? JSON.stringify(value) : value);

export async function insertEvent(db: Queryable, e: EventFields): Promise<EventRow> {
  const columns = ['id', 'tenant_id', ...WRITABLE];
  const values = columns.map((c) => param(c, e[c as keyof EventFields]));
  const { rows } = await db.query<EventRow>(
    `INSERT INTO events (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING ${COLUMNS}`,
    values,
  );
  return rows[0]!;
}

/** A live event of the tenant; 'update' locks its row. */
export async function findEvent(db: Queryable, tenantId: string, id: string, lock?: 'update'): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL${lock ? ' FOR UPDATE' : ''}`,
    [tenantId, id],
  );
  return rows[0];
}

/** Sets the patch's defined columns and updated_at on one live event. */
export async function updateEvent(db: Queryable, tenantId: string, id: string, patch: Partial<Pick<EventRow, Writable>>): Promise<EventRow> {
  const sets: string[] = [];
  const values: unknown[] = [tenantId, id];
  for (const column of WRITABLE) {
    const value = patch[column];
    if (value === undefined) continue;
    values.push(param(column, value));
    sets.push(`${column} = $${values.length}`);
  }
  const { rows } = await db.query<EventRow>(
    `UPDATE events SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    values,
  );
  return rows[0]!;
}

/** Soft-deletes live events; returns them after the change. */
export async function softDeleteEvents(db: Queryable, tenantId: string, ids: string[]): Promise<EventRow[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<EventRow>(
    `UPDATE events SET deleted_at = now(), updated_at = now() WHERE tenant_id = $1 AND id = ANY($2::uuid[]) AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, ids],
  );
  return rows;
}

/** The live exceptions of a master, locked in id order when `lock` (after the master's own lock). */
export async function exceptionsOf(db: Queryable, tenantId: string, masterId: string, lock?: 'update'): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events WHERE tenant_id = $1 AND series_id = $2 AND deleted_at IS NULL ORDER BY id${lock ? ' FOR UPDATE' : ''}`,
    [tenantId, masterId],
  );
  return rows;
}

/** What next_occurrence needs of the exceptions of some masters: which occurrence each replaces and when it starts. */
export async function exceptionStarts(db: Queryable, tenantId: string, masterIds: string[]): Promise<{ series_id: string; recurrence_id: Date; span_start: Date }[]> {
  if (masterIds.length === 0) return [];
  const { rows } = await db.query<{ series_id: string; recurrence_id: Date; span_start: Date }>(
    `SELECT series_id, recurrence_id, span_start FROM events WHERE tenant_id = $1 AND series_id = ANY($2::uuid[]) AND deleted_at IS NULL`,
    [tenantId, masterIds],
  );
  return rows;
}

/**
 * The live events that may have an occurrence overlapping [from, to): single events and exceptions
 * that overlap it, and masters whose span does. With a calendar, only its events.
 */
export async function eventsInWindow(db: Queryable, tenantId: string, calendarId: string | undefined, from: Date, to: Date): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events
      WHERE tenant_id = $1 AND deleted_at IS NULL AND ($2::uuid IS NULL OR calendar_id = $2)
        AND span_start < $4 AND (span_end IS NULL OR span_end > $3)`,
    [tenantId, calendarId ?? null, from, to],
  );
  return rows;
}

/**
 * The occurrences of these masters that exceptions replace, by original start: those in
 * [from, to) are enough to hide from an expansion of that window.
 */
export async function replacedOccurrences(db: Queryable, tenantId: string, masterIds: string[], from: Date, to: Date): Promise<{ series_id: string; recurrence_id: Date }[]> {
  if (masterIds.length === 0) return [];
  const { rows } = await db.query<{ series_id: string; recurrence_id: Date }>(
    `SELECT series_id, recurrence_id FROM events
      WHERE tenant_id = $1 AND series_id = ANY($2::uuid[]) AND deleted_at IS NULL AND recurrence_id >= $3 AND recurrence_id < $4`,
    [tenantId, masterIds, from, to],
  );
  return rows;
}

/** The calendar's live events for its feed: at most `limit`, those that end last first (series without an end first). */
export async function feedEvents(db: Queryable, tenantId: string, calendarId: string, limit: number): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events WHERE tenant_id = $1 AND calendar_id = $2 AND deleted_at IS NULL
      ORDER BY span_end DESC NULLS FIRST, id LIMIT $3`,
    [tenantId, calendarId, limit],
  );
  return rows;
}

/** Soft-deletes every live event of a calendar (its delete); returns them. */
export async function softDeleteCalendarEvents(db: Queryable, tenantId: string, calendarId: string): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `UPDATE events SET deleted_at = now(), updated_at = now() WHERE tenant_id = $1 AND calendar_id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, calendarId],
  );
  return rows;
}
