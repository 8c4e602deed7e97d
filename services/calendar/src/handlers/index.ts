import type { Handlers } from '@workauto/grpc';
import type { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import type { CalendarDeps } from './common.js';
import { createCalendarFeedToken } from './calendars/create-feed-token.js';
import { createCalendar } from './calendars/create.js';
import { deleteCalendarFeedToken } from './calendars/delete-feed-token.js';
import { deleteCalendar } from './calendars/delete.js';
import { getCalendarFeed } from './calendars/get-feed.js';
import { getCalendar } from './calendars/get.js';
import { listCalendars } from './calendars/list.js';
import { resolveCalendarFeedToken } from './calendars/resolve-feed-token.js';
import { streamCalendarFeed } from './calendars/stream-feed.js';
import { updateCalendar } from './calendars/update.js';
import { createEvent } from './events/create.js';
import { deleteEvent } from './events/delete.js';
import { getEvent } from './events/get.js';
import { listEvents } from './events/list.js';
import { updateEvent } from './events/update.js';

export type { CalendarDeps } from './common.js';

/**
 * Every rpc of CalendarService, one file per rpc: handlers/<resource>/<verb>.ts (a calendar's feed
 * and feed token in calendars/, occurrences and scoped edits of a series in events/series-edits.ts).
 */
export function calendarServiceHandlers(deps: CalendarDeps): Handlers<typeof CalendarServiceService> {
  const events = { ...deps, now: deps.now ?? (() => new Date()) };
  return {
    createCalendar: createCalendar(deps),
    listCalendars: listCalendars(deps),
    getCalendar: getCalendar(deps),
    updateCalendar: updateCalendar(deps),
    deleteCalendar: deleteCalendar(deps),
    // Deprecated, still served: /v1 keeps what it has (docs/api.md §14); StreamCalendarFeed replaces it.
    // eslint-disable-next-line @typescript-eslint/no-deprecated
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
