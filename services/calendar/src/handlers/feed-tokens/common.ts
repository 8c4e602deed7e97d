/**
 * A calendar's feed URL (docs/calendar.md, "Subscribing"): a secret token that reads the
 * calendar's iCalendar feed without an Authorization header, for calendar apps that subscribe by
 * URL. One per calendar, shown once, stored as its SHA-256 only; a new one replaces the old.
 */
import { sha256Hex } from '@workauto/crypto';
import { errors, validate, type CallContext, type DomainError } from '@workauto/grpc';
import * as calendars from '../../repo/calendars.js';
import * as feedTokens from '../../repo/feed-tokens.js';
import type { CalendarRow } from '../../repo/calendars.js';
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
