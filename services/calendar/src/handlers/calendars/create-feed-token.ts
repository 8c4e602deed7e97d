import { withTransaction } from '@workauto/db';
import { generateToken, sha256Hex } from '@workauto/crypto';
import { errors, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as calendars from '../../repo/calendars.js';
import * as feedTokens from '../../repo/feed-tokens.js';
import { SOURCE, calendarData, type CalendarDeps, type Handler } from '../common.js';

/** `wkcal_` + 43 base62 characters: about 256 bits, so the token cannot be guessed, and a prefix secret scanners can match. */
const TOKEN_PREFIX = 'wkcal_';
const TOKEN_LENGTH = 43;

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

export function createCalendarFeedToken({ pool }: CalendarDeps): Handler<'createCalendarFeedToken'> {
  return async (req, ctx) => {
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
  };
}
