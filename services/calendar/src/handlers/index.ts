import type { Handlers } from '@workauto/grpc';
import type { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { calendarHandlers } from './calendars.js';
import type { CalendarDeps } from './common.js';
import { eventHandlers } from './events.js';
import { feedHandlers } from './feed.js';

export type { CalendarDeps } from './common.js';

/** Every rpc of CalendarService: calendars.ts, events.ts (occurrences and scoped edits), feed.ts (iCalendar). */
export function calendarServiceHandlers(deps: CalendarDeps): Handlers<typeof CalendarServiceService> {
  return { ...calendarHandlers(deps), ...eventHandlers(deps), ...feedHandlers(deps) };
}
