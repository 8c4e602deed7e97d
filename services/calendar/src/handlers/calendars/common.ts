/**
 * What a calendar's feed rpcs share: the calendar a feed request may read (by its feed URL's token,
 * docs/calendar.md "Subscribing": a secret token that reads the calendar's iCalendar feed without an
 * Authorization header, for calendar apps that subscribe by URL; one per calendar, shown once,
 * stored as its SHA-256 only; a new one replaces the old), and the feed itself, in chunks.
 */
import { setImmediate as turn } from 'node:timers/promises';
import { sha256Hex } from '@workauto/crypto';
import { iterateForTenant, type Pool, type Queryable } from '@workauto/db';
import { errors, httpBodyChunks, validate, type CallContext, type DomainError } from '@workauto/grpc';
import type { HttpBody } from '@workauto/protos/google/api/httpbody.js';
import { feedEvents, feedHead, feedTail } from '../../domain/ical.js';
import * as calendars from '../../repo/calendars.js';
import type { CalendarRow } from '../../repo/calendars.js';
import * as events from '../../repo/events.js';
import * as feedTokens from '../../repo/feed-tokens.js';
import type { CalendarDeps } from '../common.js';

/** The longest token looked up (a longer one is no token of ours). */
const TOKEN_MAX = 200;

/**
 * The live calendar a feed request may read: by its token when it carries one (any tenant's, the
 * token says which), else the caller's tenant's. A token that is not the calendar's current one
 * (wrong, replaced, revoked, another calendar's, a deleted calendar's) is the same 404 as a
 * calendar that does not exist, so it confirms nothing.
 */
export async function feedCalendar(
  deps: Pick<CalendarDeps, 'pool'>,
  id: string,
  token: string,
  ctx: CallContext,
): Promise<CalendarRow> {
  validate().uuid('id', id, { required: true }).done();
  if (!token) {
    const row = await calendars.findCalendar(deps.pool, ctx.tenant, id.toLowerCase());
    if (!row) throw errors.notFound('calendar', id);
    return row;
  }
  const row =
    token.length <= TOKEN_MAX ? await feedTokens.findCalendarByFeedToken(deps.pool, sha256Hex(token)) : undefined;
  // With an API key too, the token must be one of the caller's tenant's.
  if (!row || row.id !== id.toLowerCase() || (ctx.tenantId !== undefined && ctx.tenantId !== row.tenant_id))
    throw feedNotFound(id);
  return row;
}

/** One answer for every token that does not read this calendar, whatever the reason: it confirms nothing. */
function feedNotFound(id: string): DomainError {
  const err = errors.notFound('calendar', id);
  err.message = `calendar ${id} not found, or this feed URL is not its current one (it was replaced or revoked): ask the calendar's owner for its current feed URL`;
  return err;
}

/**
 * The calendar's feed as text pieces, reading its events in keyset batches: memory holds one batch,
 * whatever the calendar's size. Every live event of the calendar is in it; an event written while
 * the feed is read may or may not be.
 */
async function* feedText(db: Queryable, tenantId: string, calendar: calendars.CalendarRow): AsyncGenerator<string> {
  const zones = new Set(await events.feedZones(db, tenantId, calendar.id));
  yield feedHead(calendar, zones);
  const late = new Set<string>();
  let after: string | undefined;
  for (;;) {
    const rows = await events.feedBatch(db, tenantId, calendar.id, after, FEED_BATCH);
    if (rows.length === 0) break;
    for (let i = 0; i < rows.length; i += RENDER_SLICE) {
      // Rendering is synchronous CPU (a few ms per large event): between slices other tenants' calls
      // get the event loop, so one tenant's feed delays them by a slice, not by a whole batch.
      if (i > 0) await turn();
      const slice = feedEvents(rows.slice(i, i + RENDER_SLICE));
      yield slice.text;
      for (const zone of slice.zones) if (!zones.has(zone)) late.add(zone);
    }
    after = rows[rows.length - 1]!.id;
    if (rows.length < FEED_BATCH) break;
  }
  yield feedTail(late);
}

/**
 * Events read per query while a feed streams: a page of the largest events (20,000-character
 * descriptions, 16 KiB of metadata) stays below about 2 MB, which is what a stream holds between
 * two reads, beside one chunk.
 */
const FEED_BATCH = 25;
/**
 * Events rendered between two turns of the event loop: one, so that another tenant's call waits
 * for one event's rendering per feed being rendered, not five (a large event takes a few ms).
 */
const RENDER_SLICE = 1;
/**
 * Text gathered before a chunk is sent: the gateway's gRPC client reads up to 16 messages ahead of
 * a slow client, so a stream costs the gateway at most about 1 MiB (docs/operations.md).
 */
const CHUNK_BYTES = 64 * 1024;
export const CONTENT_TYPE = 'text/calendar; charset=utf-8';

/**
 * The feed in chunks of about CHUNK_BYTES. The calendar is the tenant's, or the one a feed token
 * names (feedCalendar above); anything else is a 404 before the first chunk. Its pages are read in
 * the calendar's tenant's scope, so a feed read by token counts against that tenant's share of
 * the pool like one read with an API key.
 */
export async function* feedChunks(pool: Pool, id: string, token: string, ctx: CallContext): AsyncGenerator<HttpBody> {
  const calendar = await feedCalendar({ pool }, id, token, ctx);
  yield* iterateForTenant(
    calendar.tenant_id,
    httpBodyChunks(feedText(pool, calendar.tenant_id, calendar), CONTENT_TYPE, CHUNK_BYTES),
    { deadline: ctx.deadline },
  );
}
