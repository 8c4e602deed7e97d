/**
 * A calendar's feed URL (docs/calendar.md, "Subscribing"): a secret token that reads the
 * calendar's iCalendar feed without an Authorization header, for calendar apps that subscribe by
 * URL. One per calendar, shown once, stored as its SHA-256 only; a new one replaces the old.
 */
import { withTransaction } from '@workauto/db';
import { generateToken, sha256Hex } from '@workauto/crypto';
import { errors, validate, type CallContext, type DomainError, type Handlers } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import * as calendars from '../repo/calendars.js';
import * as feedTokens from '../repo/feed-tokens.js';
import type { CalendarRow } from '../repo/calendars.js';
import { SOURCE, calendarData, type CalendarDeps } from './common.js';

type H = Handlers<typeof CalendarServiceService>;

/** `wkcal_` + 43 base62 characters: about 256 bits, so the token cannot be guessed, and a prefix secret scanners can match. */
const TOKEN_PREFIX = 'wkcal_';
const TOKEN_LENGTH = 43;
/** The longest token looked up (a longer one is no token of ours). */
const TOKEN_MAX = 200;

/** The origin a feed_url starts with: the gateway fills it (PUBLIC_BASE_URL or the request's Host); gRPC callers send it. */
function originOf(text: string): string | undefined {
  try {
    const url = new URL(text);
    if ((url.protocol === 'https:' || url.protocol === 'http:') && (text === url.origin || text === `${url.origin}/`))
      return url.origin;
  } catch {
    // not a URL
  }
  return undefined;
}

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

export function feedTokenHandlers({
  pool,
}: CalendarDeps): Pick<H, 'createCalendarFeedToken' | 'deleteCalendarFeedToken' | 'resolveCalendarFeedToken'> {
  return {
    /** Whose token this is: the gateway admits the feed request under that tenant's limits (docs/calendar.md). */
    async resolveCalendarFeedToken(req, ctx) {
      if (!req.token) throw errors.invalidField('token', "is required: the feed URL's token");
      const calendar = await feedCalendar({ pool }, req.id, req.token, ctx);
      return { tenant_id: calendar.tenant_id };
    },

    async createCalendarFeedToken(req, ctx) {
      const v = validate();
      const origin = originOf(req.public_base_url);
      if (!origin)
        v.add(
          'public_base_url',
          'must be the origin clients reach the API at, e.g. https://api.example.com (the gateway fills it from PUBLIC_BASE_URL)',
        );
      v.done();
      const token = generateToken(TOKEN_PREFIX, TOKEN_LENGTH);
      // The response is built inside the transaction, so a keyed call's record keeps it (the URL is
      // shown once) with the write (docs/api.md, Idempotency).
      return withTransaction(
        pool,
        async (tx) => {
          // FOR UPDATE: a calendar deleted meanwhile waits for this, or this finds it gone.
          const calendar = await calendars.findCalendar(tx, ctx.tenant, req.id.toLowerCase(), 'update');
          if (!calendar) throw errors.notFound('calendar', req.id);
          const replaced = await feedTokens.deleteFeedToken(tx, ctx.tenant, calendar.id);
          const row = await feedTokens.insertFeedToken(tx, ctx.tenant, calendar.id, sha256Hex(token));
          await recordEvent(tx, SOURCE, ctx, {
            type: 'calendar.feed_token_created',
            resourceType: 'calendar',
            resourceId: calendar.id,
            data: calendarData(calendar),
            metadata: { replaced, created_at: row.created_at },
          });
          return {
            feed_url: `${origin}/api/v1/calendars/${row.calendar_id}/events.ics?token=${token}`,
            created_at: row.created_at,
          };
        },
        { signal: ctx.signal },
      );
    },

    async deleteCalendarFeedToken(req, ctx) {
      await withTransaction(
        pool,
        async (tx) => {
          const calendar = await calendars.findCalendar(tx, ctx.tenant, req.id.toLowerCase(), 'update');
          if (!calendar) throw errors.notFound('calendar', req.id);
          // Revoking what is not there is done already: 204, and nothing to audit.
          if (!(await feedTokens.deleteFeedToken(tx, ctx.tenant, calendar.id))) return;
          await recordEvent(tx, SOURCE, ctx, {
            type: 'calendar.feed_token_revoked',
            resourceType: 'calendar',
            resourceId: calendar.id,
            data: calendarData(calendar),
          });
        },
        { signal: ctx.signal },
      );
      return {};
    },
  };
}
