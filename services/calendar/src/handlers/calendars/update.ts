import { withTransaction } from '@workauto/db';
import { errors, patchNulls, validate, changedFields, textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { recurrence } from '../../domain/errors.js';
import { canonicalTimezone } from '../../domain/recurrence.js';
import * as calendars from '../../repo/calendars.js';
import { SOURCE, calendarData, toCalendar, type CalendarDeps, type Handler } from '../common.js';

export function updateCalendar({ pool }: CalendarDeps): Handler<'updateCalendar'> {
  return async (req, ctx) => {
    const v = validate();
    const { req: r } = patchNulls(req, { text: ['description', 'color'] }, v);
    v.done();
    const patch = {
      name: r.name?.trim(),
      description: textOrNull(r.description),
      color: textOrNull(r.color),
      timezone: r.timezone === undefined ? undefined : recurrence(() => canonicalTimezone(r.timezone!)),
      metadata: r.metadata,
    };
    return withTransaction(
      pool,
      async (tx) => {
        const current = await calendars.findCalendar(tx, ctx.tenant, req.id.toLowerCase(), 'update');
        if (!current) throw errors.notFound('calendar', req.id);
        if (Object.values(patch).every((x) => x === undefined)) return toCalendar(current);
        const row = await calendars.updateCalendar(tx, ctx.tenant, current.id, patch);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'calendar.updated',
          resourceType: 'calendar',
          resourceId: row.id,
          data: calendarData(row),
          metadata: changedFields(patch),
        });
        return toCalendar(row);
      },
      { signal: ctx.signal },
    );
  };
}
