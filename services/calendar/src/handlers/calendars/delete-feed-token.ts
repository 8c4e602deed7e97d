import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as calendars from '../../repo/calendars.js';
import * as feedTokens from '../../repo/feed-tokens.js';
import { SOURCE, calendarData, type CalendarDeps, type Handler } from '../common.js';

export function deleteCalendarFeedToken({ pool }: CalendarDeps): Handler<'deleteCalendarFeedToken'> {
  return async (req, ctx) => {
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
  };
}
