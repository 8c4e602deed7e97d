import { newId, withTransaction } from '@workauto/db';
import { textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { recurrence } from '../../domain/errors.js';
import { canonicalTimezone } from '../../domain/recurrence.js';
import * as calendars from '../../repo/calendars.js';
import { SOURCE, calendarData, toCalendar, type CalendarDeps, type Handler } from '../common.js';

export function createCalendar({ pool }: CalendarDeps): Handler<'createCalendar'> {
  return async (req, ctx) => {
    const timezone = recurrence(() => canonicalTimezone(req.timezone ?? 'UTC'));
    return withTransaction(
      pool,
      async (tx) => {
        const row = await calendars.insertCalendar(tx, {
          id: newId(),
          tenant_id: ctx.tenant,
          name: req.name.trim(),
          description: textOrNull(req.description) ?? null,
          timezone,
          color: req.color?.trim() ?? null,
          metadata: req.metadata ?? {},
        });
        await recordEvent(tx, SOURCE, ctx, {
          type: 'calendar.created',
          resourceType: 'calendar',
          resourceId: row.id,
          data: calendarData(row),
        });
        return toCalendar(row);
      },
      { signal: ctx.signal },
    );
  };
}
