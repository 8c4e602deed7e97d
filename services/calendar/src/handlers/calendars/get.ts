import { errors } from '@workauto/grpc';
import * as calendars from '../../repo/calendars.js';
import { toCalendar, type CalendarDeps, type Handler } from '../common.js';

export function getCalendar({ pool }: CalendarDeps): Handler<'getCalendar'> {
  return async (req, ctx) => {
    const row = await calendars.findCalendar(pool, ctx.tenant, req.id.toLowerCase());
    if (!row) throw errors.notFound('calendar', req.id);
    return toCalendar(row);
  };
}
