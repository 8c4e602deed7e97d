import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as calendars from '../../repo/calendars.js';
import * as events from '../../repo/events.js';
import * as feedTokens from '../../repo/feed-tokens.js';
import { SOURCE, calendarData, toEvent, eventData, type CalendarDeps, type Handler } from '../common.js';

export function deleteCalendar({ pool }: CalendarDeps): Handler<'deleteCalendar'> {
  return async (req, ctx) => {
    await withTransaction(
      pool,
      async (tx) => {
        // FOR UPDATE waits for event writes holding KEY SHARE on it, and blocks new ones.
        const current = await calendars.findCalendar(tx, ctx.tenant, req.id.toLowerCase(), 'update');
        if (!current) throw errors.notFound('calendar', req.id);
        const row = await calendars.softDeleteCalendar(tx, ctx.tenant, current.id);
        // Its feed URL goes with it (the feed of a deleted calendar is a 404 either way).
        await feedTokens.deleteFeedToken(tx, ctx.tenant, current.id);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'calendar.deleted',
          resourceType: 'calendar',
          resourceId: row.id,
          data: calendarData(row),
          metadata: { deleted_at: row.deleted_at },
        });
        const deleted = await events.softDeleteCalendarEvents(tx, ctx.tenant, current.id);
        // After the events' delete, which waited for changes in flight on them (their index rows included).
        await events.deleteCalendarIndex(tx, ctx.tenant, current.id);
        for (const ev of deleted) {
          await recordEvent(tx, SOURCE, ctx, {
            type: 'calendar_event.deleted',
            resourceType: 'calendar_event',
            resourceId: ev.id,
            parent: { type: 'calendar', id: current.id },
            data: eventData(toEvent(ev)),
            metadata: { deleted_at: ev.deleted_at, deleted_with: current.id },
          });
        }
      },
      { signal: ctx.signal },
    );
    return {};
  };
}
