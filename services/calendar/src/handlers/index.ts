import type { Handlers } from '@workauto/grpc';
import type { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { calendarHandlers } from './calendars.js';
import type { CalendarDeps } from './common.js';
import { createEvent } from './events/create.js';
import { deleteEvent } from './events/delete.js';
import { getEvent } from './events/get.js';
import { listEvents } from './events/list.js';
import { updateEvent } from './events/update.js';
import { feedHandlers } from './feed.js';

export type { CalendarDeps } from './common.js';

/**
 * Every rpc of CalendarService: calendars.ts; events/, one file per event rpc (occurrences, scoped
 * edits of a series in events/series-edits.ts); feed.ts (iCalendar).
 */
export function calendarServiceHandlers(deps: CalendarDeps): Handlers<typeof CalendarServiceService> {
  const events = { ...deps, now: deps.now ?? (() => new Date()) };
  return {
    ...calendarHandlers(deps),
    createEvent: createEvent(events),
    listEvents: listEvents(events),
    getEvent: getEvent(events),
    updateEvent: updateEvent(events),
    deleteEvent: deleteEvent(events),
    ...feedHandlers(deps),
  };
}
