import { parsePage, toPage } from '@workauto/grpc';
import * as calendars from '../../repo/calendars.js';
import { toCalendar, type CalendarDeps, type Handler } from '../common.js';

export function listCalendars({ pool }: CalendarDeps): Handler<'listCalendars'> {
  return async (req, ctx) => {
    const page = parsePage(req);
    return toPage(await calendars.listCalendars(pool, ctx.tenant, page), toCalendar);
  };
}
