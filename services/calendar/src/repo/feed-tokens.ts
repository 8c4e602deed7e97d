import type { Queryable } from '@workauto/db';
import { COLUMNS as CALENDAR_COLUMNS, type CalendarRow } from './calendars.js';

/** A calendar's feed token as stored: its hash only. */
export interface FeedTokenRow {
  calendar_id: string;
  tenant_id: string;
  created_at: Date;
}

/** Stores a calendar's new token (its hash); the calendar's old one is deleted first, in the same transaction. */
export async function insertFeedToken(
  db: Queryable,
  tenantId: string,
  calendarId: string,
  tokenHash: string,
): Promise<FeedTokenRow> {
  const { rows } = await db.query<FeedTokenRow>(
    `INSERT INTO calendar_feed_tokens (calendar_id, tenant_id, token_hash) VALUES ($1, $2, $3)
     RETURNING calendar_id, tenant_id, created_at`,
    [calendarId, tenantId, tokenHash],
  );
  return rows[0]!;
}

/** Deletes a calendar's token; whether it had one. */
export async function deleteFeedToken(db: Queryable, tenantId: string, calendarId: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM calendar_feed_tokens WHERE tenant_id = $1 AND calendar_id = $2', [
    tenantId,
    calendarId,
  ]);
  return (rowCount ?? 0) > 0;
}

/**
 * The live calendar whose current token has this hash (any tenant: the token is the only thing
 * the request carries). A lookup by the hash's unique index, so nothing about the secret is
 * compared byte by byte.
 */
export async function findCalendarByFeedToken(db: Queryable, tokenHash: string): Promise<CalendarRow | undefined> {
  const { rows } = await db.query<CalendarRow>(
    `SELECT ${CALENDAR_COLUMNS.split(', ')
      .map((c) => `c.${c}`)
      .join(', ')}
       FROM calendar_feed_tokens t JOIN calendars c ON c.id = t.calendar_id AND c.tenant_id = t.tenant_id
      WHERE t.token_hash = $1 AND c.deleted_at IS NULL`,
    [tokenHash],
  );
  return rows[0];
}
