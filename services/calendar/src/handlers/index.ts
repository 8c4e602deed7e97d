import type { Handlers } from '@workauto/grpc';
import type { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import type { CalendarDeps } from './common.js';
import { createCalendar } from './calendars/create.js';
import { deleteCalendar } from './calendars/delete.js';
import { getCalendar } from './calendars/get.js';
import { listCalendars } from './calendars/list.js';
import { updateCalendar } from './calendars/update.js';
import { createEvent } from './events/create.js';
import { deleteEvent } from './events/delete.js';
import { getEvent } from './events/get.js';
import { listEvents } from './events/list.js';
import { updateEvent } from './events/update.js';
import { createCalendarFeedToken } from './feed-tokens/create.js';
import { deleteCalendarFeedToken } from './feed-tokens/delete.js';
import { resolveCalendarFeedToken } from './feed-tokens/resolve.js';
import { getCalendarFeed } from './feeds/get.js';
import { streamCalendarFeed } from './feeds/stream.js';

export type { CalendarDeps } from './common.js';

/**
 * Every rpc of CalendarService, one file per rpc: handlers/<resource>/<verb>.ts (occurrences and
 * scoped edits of a series in events/series-edits.ts, iCalendar rendering in feeds/common.ts).
 */
export function calendarServiceHandlers(deps: CalendarDeps): Handlers<typeof CalendarServiceService> {
  const events = { ...deps, now: deps.now ?? (() => new Date()) };
  return {
    createCalendar: createCalendar(deps),
    listCalendars: listCalendars(deps),
    getCalendar: getCalendar(deps),
    updateCalendar: updateCalendar(deps),
    deleteCalendar: deleteCalendar(deps),
    getCalendarFeed: getCalendarFeed(deps),
    streamCalendarFeed: streamCalendarFeed(deps),
    resolveCalendarFeedToken: resolveCalendarFeedToken(deps),
    createCalendarFeedToken: createCalendarFeedToken(deps),
    deleteCalendarFeedToken: deleteCalendarFeedToken(deps),
    createEvent: createEvent(events),
    listEvents: listEvents(events),
    getEvent: getEvent(events),
    updateEvent: updateEvent(events),
    deleteEvent: deleteEvent(events),
  };
}
