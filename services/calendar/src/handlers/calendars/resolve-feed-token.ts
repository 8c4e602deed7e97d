import { errors } from '@workauto/grpc';
import type { CalendarDeps, Handler } from '../common.js';
import { feedCalendar } from './common.js';

/** Whose token this is: the gateway admits the feed request under that tenant's limits (docs/calendar.md). */
export function resolveCalendarFeedToken({ pool }: CalendarDeps): Handler<'resolveCalendarFeedToken'> {
  return async (req, ctx) => {
    if (!req.token) throw errors.invalidField('token', "is required: the feed URL's token");
    const calendar = await feedCalendar({ pool }, req.id, req.token, ctx);
    return { tenant_id: calendar.tenant_id };
  };
}
