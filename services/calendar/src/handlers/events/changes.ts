import { textOrNull } from '@workauto/grpc';
import type {
  CreateEventRequest,
  Reminder,
  UpdateEventRequest,
} from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { recurrence } from '../../domain/errors.js';
import type { Changes } from '../../domain/event-state.js';
import { canonicalTimezone } from '../../domain/recurrence.js';
import type { ReminderRow } from '../../repo/events.js';
import { availabilities, eventTypes, reminderMethods, statuses, visibilities } from '../common.js';
import { lower } from './common.js';

const reminderRows = (rs: Reminder[]): ReminderRow[] =>
  rs.map((r) => ({ method: reminderMethods.toDomain(r.method) as ReminderRow['method'], minutes: r.minutes }));

function timezoneOf(value: string | undefined): string | undefined {
  return value === undefined ? undefined : recurrence(() => canonicalTimezone(value));
}

/** The changes a create or PUT carries (`carried(f)`: the body has the key). */
export function changesOf(
  req: CreateEventRequest | UpdateEventRequest,
  carried: (f: string) => boolean,
  cleared: ReadonlySet<string> = new Set(),
): Changes {
  // '' (and null, which patchNulls turns into '') clears a text field.
  const text = (v: string | undefined) => (v === undefined ? undefined : (textOrNull(v) ?? null));
  const num = (f: 'location_lat' | 'location_lng', v: number | undefined) => (cleared.has(f) ? null : v);
  const time = (f: 'start_at' | 'end_at', v: Date | undefined) => (cleared.has(f) ? null : v);
  const date = (v: string | undefined) => (v === undefined ? undefined : v === '' ? null : v);
  return {
    descriptive: {
      title: req.title === undefined ? undefined : req.title.trim(),
      description: text(req.description),
      location: text(req.location),
      location_lat: num('location_lat', req.location_lat),
      location_lng: num('location_lng', req.location_lng),
      conference_url: text(req.conference_url),
      color: text(req.color),
      organizer_id:
        req.organizer_id === undefined ? undefined : req.organizer_id === '' ? null : lower(req.organizer_id),
      event_type: eventTypes.toDomain(req.event_type),
      status: statuses.toDomain(req.status),
      availability: availabilities.toDomain(req.availability),
      visibility: visibilities.toDomain(req.visibility),
      reminders: carried('reminders') ? reminderRows(req.reminders) : undefined,
      metadata: req.metadata,
    },
    timing: {
      is_all_day: req.is_all_day,
      start_at: time('start_at', req.start_at),
      end_at: time('end_at', req.end_at),
      start_date: date(req.start_date),
      end_date: date(req.end_date),
      timezone: timezoneOf(req.timezone),
      rrule: req.rrule === undefined ? undefined : req.rrule === '' ? null : req.rrule,
      exdates: carried('exdates') ? req.exdates : undefined,
    },
  };
}
