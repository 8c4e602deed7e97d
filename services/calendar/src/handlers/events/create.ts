import { newId, withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { derived, mergeTiming } from '../../domain/event-state.js';
import { icalUid } from '../../domain/series.js';
import { reindex } from '../../occurrence-index.js';
import * as calendars from '../../repo/calendars.js';
import * as events from '../../repo/events.js';
import { type Handler } from '../common.js';
import { changesOf } from './changes.js';
import { emit, lower, type EventDeps } from './common.js';

export function createEvent(deps: EventDeps): Handler<'createEvent'> {
  const { pool, now } = deps;
  return async (req, ctx) => {
    const c = changesOf(req, (f) =>
      f === 'reminders' || f === 'exdates' ? true : (req as unknown as Record<string, unknown>)[f] !== undefined,
    );
    if (c.timing.is_all_day === undefined)
      c.timing.is_all_day = req.start_date !== undefined && req.start_at === undefined;
    return withTransaction(
      pool,
      async (tx) => {
        const calendar = await calendars.findCalendar(tx, ctx.tenant, lower(req.calendar_id), 'share');
        if (!calendar) throw errors.notFound('calendar', req.calendar_id);
        const timing = mergeTiming(
          {
            is_all_day: false,
            start_at: null,
            end_at: null,
            start_date: null,
            end_date: null,
            timezone: calendar.timezone,
            rrule: null,
            exdates: [],
          },
          c.timing,
        );
        const id = newId();
        const d = c.descriptive;
        const row = await events.insertEvent(tx, {
          id,
          tenant_id: ctx.tenant,
          calendar_id: calendar.id,
          series_id: null,
          recurrence_id: null,
          title: d.title!,
          description: d.description ?? null,
          location: d.location ?? null,
          location_lat: d.location_lat ?? null,
          location_lng: d.location_lng ?? null,
          conference_url: d.conference_url ?? null,
          color: d.color ?? null,
          event_type: d.event_type ?? 'default',
          status: d.status ?? 'confirmed',
          availability: d.availability ?? 'busy',
          visibility: d.visibility ?? 'default',
          reminders: d.reminders ?? [],
          organizer_id: d.organizer_id ?? null,
          metadata: d.metadata ?? {},
          ...timing,
          ...derived(timing),
          ical_uid: icalUid(id),
          sequence: 0,
        });
        await reindex(tx, ctx.tenant, [row.id], now());
        return emit(deps, tx, ctx, 'calendar_event.created', row);
      },
      { signal: ctx.signal },
    );
  };
}
