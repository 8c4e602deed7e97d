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
  indexed_from: Date | null;
  indexed_until: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/** The columns a write sets (everything but the timestamps the database keeps). */
export type EventFields = Omit<EventRow, 'created_at' | 'updated_at' | 'deleted_at' | 'indexed_from' | 'indexed_until'>;

const COLUMNS = `id, tenant_id, calendar_id, series_id, recurrence_id, title, description, location, location_lat, location_lng,
  conference_url, color, event_type, status, availability, visibility, is_all_day, start_at, end_at,
  start_date::text AS start_date, end_date::text AS end_date, timezone, rrule, exdates, reminders, organizer_id, ical_uid,
  sequence, metadata, span_start, span_end, indexed_from, indexed_until, created_at, updated_at, deleted_at`;

const WRITABLE = [
  'calendar_id',
  'series_id',
  'recurrence_id',
  'title',
  'description',
  'location',
  'location_lat',
  'location_lng',
  'conference_url',
  'color',
  'event_type',
  'status',
  'availability',
  'visibility',
  'is_all_day',
  'start_at',
  'end_at',
  'start_date',
  'end_date',
  'timezone',
  'rrule',
  'exdates',
  'reminders',
  'organizer_id',
  'ical_uid',
  'sequence',
  'metadata',
  'span_start',
  'span_end',
] as const;
type Writable = (typeof WRITABLE)[number];

/** jsonb columns get JSON text (node-postgres would send a JS array as a PostgreSQL array). */
const param = (column: string, value: unknown) =>
  column === 'reminders' || column === 'metadata' ? JSON.stringify(value) : value;

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
export async function findEvent(
  db: Queryable,
  tenantId: string,
  id: string,
  lock?: 'update',
): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL${lock ? ' FOR UPDATE' : ''}`,
    [tenantId, id],
  );
  return rows[0];
}

/** Sets the patch's defined columns and updated_at on one live event. */
export async function updateEvent(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: Partial<Pick<EventRow, Writable>>,
): Promise<EventRow> {
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
export async function exceptionsOf(
  db: Queryable,
  tenantId: string,
  masterId: string,
  lock?: 'update',
): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events WHERE tenant_id = $1 AND series_id = $2 AND deleted_at IS NULL ORDER BY id${lock ? ' FOR UPDATE' : ''}`,
    [tenantId, masterId],
  );
  return rows;
}

/** What next_occurrence needs of the exceptions of some masters: which occurrence each replaces and when it starts. */
export async function exceptionStarts(
  db: Queryable,
  tenantId: string,
  masterIds: string[],
): Promise<{ series_id: string; recurrence_id: Date; span_start: Date }[]> {
  if (masterIds.length === 0) return [];
  const { rows } = await db.query<{ series_id: string; recurrence_id: Date; span_start: Date }>(
    `SELECT series_id, recurrence_id, span_start FROM events WHERE tenant_id = $1 AND series_id = ANY($2::uuid[]) AND deleted_at IS NULL`,
    [tenantId, masterIds],
  );
  return rows;
}

/**
 * The occurrences of these masters that exceptions replace, by original start: those in
 * [from, to) are enough to hide from an expansion of that window.
 */
export async function replacedOccurrences(
  db: Queryable,
  tenantId: string,
  masterIds: string[],
  from: Date,
  to: Date,
): Promise<{ series_id: string; recurrence_id: Date }[]> {
  if (masterIds.length === 0) return [];
  const { rows } = await db.query<{ series_id: string; recurrence_id: Date }>(
    `SELECT series_id, recurrence_id FROM events
      WHERE tenant_id = $1 AND series_id = ANY($2::uuid[]) AND deleted_at IS NULL AND recurrence_id >= $3 AND recurrence_id < $4`,
    [tenantId, masterIds, from, to],
  );
  return rows;
}

/** The time zones the calendar's live timed events use (the feed's VTIMEZONEs; UTC needs none). */
export async function feedZones(db: Queryable, tenantId: string, calendarId: string): Promise<string[]> {
  const { rows } = await db.query<{ timezone: string }>(
    `SELECT DISTINCT timezone FROM events
      WHERE tenant_id = $1 AND calendar_id = $2 AND deleted_at IS NULL AND NOT is_all_day AND timezone <> 'UTC'
      ORDER BY timezone`,
    [tenantId, calendarId],
  );
  return rows.map((r) => r.timezone);
}

/** The calendar's live events after the id `after` in id order, at most `limit`: the feed reads them batch by batch. */
export async function feedBatch(
  db: Queryable,
  tenantId: string,
  calendarId: string,
  after: string | undefined,
  limit: number,
): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events
      WHERE tenant_id = $1 AND calendar_id = $2 AND deleted_at IS NULL AND ($3::uuid IS NULL OR id > $3)
      ORDER BY id LIMIT $4`,
    [tenantId, calendarId, after ?? null, limit],
  );
  return rows;
}

/** Soft-deletes every live event of a calendar (its delete); returns them. */
export async function softDeleteCalendarEvents(
  db: Queryable,
  tenantId: string,
  calendarId: string,
): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `UPDATE events SET deleted_at = now(), updated_at = now() WHERE tenant_id = $1 AND calendar_id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, calendarId],
  );
  return rows;
}

// ---- the occurrence index (docs/calendar.md) ----------------------------------------------------

/** One listed occurrence as indexed. */
export interface IndexEntry {
  tenant_id: string;
  calendar_id: string;
  event_id: string;
  recurrence_id: Date | null;
  sort_start: Date;
  sort_end: Date;
  start_at: Date | null;
  end_at: Date | null;
  start_date: string | null;
  end_date: string | null;
}

const LONG_MS = 86_400_000;

/** Removes the index rows of these events and, for masters, of their exceptions. */
export async function deleteIndex(db: Queryable, tenantId: string, eventIds: string[]): Promise<void> {
  await db.query(
    `DELETE FROM occurrences WHERE tenant_id = $1
        AND (event_id = ANY($2::uuid[]) OR event_id IN (SELECT id FROM events WHERE tenant_id = $1 AND series_id = ANY($2::uuid[])))`,
    [tenantId, eventIds],
  );
}

/** Removes the index rows of one occurrence of a series: the master's and its exception's. */
export async function deleteOccurrenceIndex(
  db: Queryable,
  tenantId: string,
  masterId: string,
  recurrenceId: Date,
): Promise<void> {
  await db.query(
    `DELETE FROM occurrences WHERE tenant_id = $1 AND rid_key = $3
        AND (event_id = $2 OR event_id IN (SELECT id FROM events WHERE tenant_id = $1 AND series_id = $2))`,
    [tenantId, masterId, recurrenceId],
  );
}

/** The live exception of a master for one occurrence, if any. */
export async function exceptionAt(
  db: Queryable,
  tenantId: string,
  masterId: string,
  recurrenceId: Date,
): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events WHERE tenant_id = $1 AND series_id = $2 AND recurrence_id = $3 AND deleted_at IS NULL`,
    [tenantId, masterId, recurrenceId],
  );
  return rows[0];
}

export async function insertIndex(db: Queryable, entries: IndexEntry[]): Promise<void> {
  for (let i = 0; i < entries.length; i += 1_000) {
    const batch = entries.slice(i, i + 1_000);
    const col = <K extends keyof IndexEntry>(k: K) => batch.map((e) => e[k]);
    await db.query(
      `INSERT INTO occurrences (tenant_id, calendar_id, event_id, recurrence_id, sort_start, rid_key, sort_end, start_at, end_at, start_date, end_date, is_long)
       SELECT t, c, e, r, s, coalesce(r, '-infinity'), x, sa, ea, sd, ed, x - s > interval '1 day'
         FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::date[], $10::date[])
           AS u(t, c, e, r, s, x, sa, ea, sd, ed)`,
      [
        col('tenant_id'),
        col('calendar_id'),
        col('event_id'),
        col('recurrence_id'),
        col('sort_start'),
        col('sort_end'),
        col('start_at'),
        col('end_at'),
        col('start_date'),
        col('end_date'),
      ],
    );
  }
}

/** Records which stretch of a master's occurrences the index holds (no updated_at: the event did not change). */
export async function setIndexedRange(
  db: Queryable,
  tenantId: string,
  id: string,
  range: { from: Date; until: Date; capped: boolean },
): Promise<void> {
  await db.query(
    `UPDATE events SET indexed_from = $3, indexed_until = $4, index_capped = $5 WHERE tenant_id = $1 AND id = $2`,
    [tenantId, id, range.from, range.until, range.capped],
  );
}

/** The live exceptions of these masters (any state), for indexing. */
export async function liveExceptions(db: Queryable, tenantId: string, masterIds: string[]): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events WHERE tenant_id = $1 AND series_id = ANY($2::uuid[]) AND deleted_at IS NULL`,
    [tenantId, masterIds],
  );
  return rows;
}

const E_COLUMNS = COLUMNS.replace(/(^|,\s*)(\w+)/g, '$1e.$2');

export interface IndexedRow {
  event: EventRow;
  entry: Pick<IndexEntry, 'recurrence_id' | 'sort_start' | 'start_at' | 'end_at' | 'start_date' | 'end_date'>;
}

/**
 * One page of the indexed occurrences overlapping [from, to) after the keyset `after`, in
 * (start, event id, recurrence id) order: at most `limit` rows. Occurrences of a day or less are
 * found by their start (at most a day before the window), longer ones by their end.
 */
export async function indexedPage(
  db: Queryable,
  tenantId: string,
  calendarId: string | undefined,
  window: { from: Date; to: Date },
  after: { start: Date; id: string; recurrenceId: Date | null } | undefined,
  limit: number,
): Promise<IndexedRow[]> {
  const params: unknown[] = [
    tenantId,
    calendarId ?? null,
    window.from,
    window.to,
    new Date(window.from.getTime() - LONG_MS),
    limit,
  ];
  let keyset = '';
  if (after) {
    params.push(after.start, after.id, after.recurrenceId ?? '-infinity');
    keyset = 'AND (o.sort_start, o.event_id, o.rid_key) > ($7::timestamptz, $8::uuid, $9::timestamptz)';
  }
  const part = (long: boolean) => `
    (SELECT o.sort_start, o.event_id, o.rid_key FROM occurrences o
      WHERE o.tenant_id = $1 AND ${long ? 'o.is_long' : 'NOT o.is_long AND o.sort_start >= $5'} AND ($2::uuid IS NULL OR o.calendar_id = $2)
        AND o.sort_start < $4 AND o.sort_end > $3 ${keyset}
      ORDER BY o.sort_start, o.event_id, o.rid_key LIMIT $6)`;
  const { rows } = await db.query<
    EventRow & {
      o_recurrence_id: Date | null;
      o_sort_start: Date;
      o_start_at: Date | null;
      o_end_at: Date | null;
      o_start_date: string | null;
      o_end_date: string | null;
    }
  >(
    `WITH page AS (${part(false)} UNION ALL ${part(true)} ORDER BY 1, 2, 3 LIMIT $6)
     SELECT ${E_COLUMNS}, o.recurrence_id AS o_recurrence_id, o.sort_start AS o_sort_start, o.start_at AS o_start_at, o.end_at AS o_end_at,
            o.start_date::text AS o_start_date, o.end_date::text AS o_end_date
       FROM page p JOIN occurrences o ON o.event_id = p.event_id AND o.rid_key = p.rid_key JOIN events e ON e.id = o.event_id AND e.deleted_at IS NULL
      ORDER BY p.sort_start, p.event_id, p.rid_key`,
    params,
  );
  return rows.map(({ o_recurrence_id, o_sort_start, o_start_at, o_end_at, o_start_date, o_end_date, ...event }) => ({
    event: event,
    entry: {
      recurrence_id: o_recurrence_id,
      sort_start: o_sort_start,
      start_at: o_start_at,
      end_at: o_end_at,
      start_date: o_start_date,
      end_date: o_end_date,
    },
  }));
}

/** Live masters with occurrences in [from, to) that their index does not cover (expanded on read). */
export async function unindexedMasters(
  db: Queryable,
  tenantId: string,
  calendarId: string | undefined,
  from: Date,
  to: Date,
): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${COLUMNS} FROM events
      WHERE tenant_id = $1 AND deleted_at IS NULL AND rrule IS NOT NULL AND ($2::uuid IS NULL OR calendar_id = $2)
        AND span_start < $4 AND (span_end IS NULL OR span_end > $3)
        AND (indexed_until IS NULL OR indexed_until < $4
             -- occurrences before the index's start that may still overlap the window
             OR (indexed_from > span_start AND $3 < indexed_from + coalesce(end_at - start_at, (end_date - start_date + 1) * interval '1 day')))`,
    [tenantId, calendarId ?? null, from, to],
  );
  return rows;
}

/**
 * The extender's work, locked for it: masters whose series goes on past their index and whose index
 * ends before `horizon` (`cappedHorizon` for dense series, whose index cannot reach further anyway).
 */
export async function mastersToReindex(
  db: Queryable,
  horizon: Date,
  cappedHorizon: Date,
  limit: number,
): Promise<{ id: string; tenant_id: string }[]> {
  const { rows } = await db.query<{ id: string; tenant_id: string }>(
    `SELECT id, tenant_id FROM events
      WHERE deleted_at IS NULL AND rrule IS NOT NULL AND indexed_until < $1 AND (span_end IS NULL OR indexed_until < span_end)
        AND (NOT index_capped OR indexed_until < $2)
      ORDER BY indexed_until LIMIT $3 FOR UPDATE SKIP LOCKED`,
    [horizon, cappedHorizon, limit],
  );
  return rows;
}

/**
 * For next_occurrence: per master, its first indexed occurrence start after `now` and the first
 * start after `now` of its live exceptions (both null when there is none).
 */
export async function nextStarts(
  db: Queryable,
  tenantId: string,
  masterIds: string[],
  now: Date,
): Promise<Map<string, { occurrence: Date | null; exception: Date | null }>> {
  if (masterIds.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; occurrence: Date | null; exception: Date | null }>(
    `SELECT m.id,
            (SELECT min(o.sort_start) FROM occurrences o WHERE o.event_id = m.id AND o.sort_start > $3) AS occurrence,
            (SELECT min(x.span_start) FROM events x WHERE x.tenant_id = $1 AND x.series_id = m.id AND x.deleted_at IS NULL AND x.span_start > $3) AS exception
       FROM events m WHERE m.tenant_id = $1 AND m.id = ANY($2::uuid[])`,
    [tenantId, masterIds, now],
  );
  return new Map(rows.map((r) => [r.id, { occurrence: r.occurrence, exception: r.exception }]));
}

/** Removes a calendar's index rows (its delete). */
export async function deleteCalendarIndex(db: Queryable, tenantId: string, calendarId: string): Promise<void> {
  await db.query(`DELETE FROM occurrences WHERE tenant_id = $1 AND calendar_id = $2`, [tenantId, calendarId]);
}
