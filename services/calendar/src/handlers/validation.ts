import { checkEnum, checkHttpUrl, checkMetadata, checkYears, type Validator } from '@workauto/grpc';
import type {
  CreateEventRequest,
  Reminder,
  UpdateEventRequest,
} from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { LIMITS, availabilities, eventTypes, reminderMethods, statuses, visibilities } from './common.js';

// Field checks of this service, added to one Validator so a request's problems come together.

function checkCoordinate(v: Validator, field: string, value: number | undefined, max: number): Validator {
  if (value === undefined) return v;
  return Number.isFinite(value) && Math.abs(value) <= max
    ? v
    : v.add(field, `must be a number from -${max} to ${max} (degrees)`);
}

function checkReminders(v: Validator, reminders: Reminder[]): Validator {
  if (reminders.length > LIMITS.reminders) return v.add('reminders', `must have at most ${LIMITS.reminders} reminders`);
  reminders.forEach((r, i) => {
    checkEnum(v, `reminders[${i}].method`, r.method, reminderMethods, true);
    if (!Number.isInteger(r.minutes) || r.minutes < 0 || r.minutes > LIMITS.reminderMinutes) {
      v.add(
        `reminders[${i}].minutes`,
        `must be a whole number of minutes from 0 to ${LIMITS.reminderMinutes} (four weeks)`,
      );
    }
  });
  return v;
}

/** The descriptive fields' checks, common to create and update (times and rules are checked by the recurrence engine). */
export function checkEventFields(
  v: Validator,
  req: CreateEventRequest | UpdateEventRequest,
  clearable: boolean,
): Validator {
  const min = clearable ? 0 : 1;
  v.text('description', req.description, { min: 0, max: LIMITS.description })
    .text('location', req.location, { min, max: LIMITS.location })
    .text('color', req.color, { min, max: LIMITS.color })
    .uuid('organizer_id', req.organizer_id === '' && clearable ? undefined : req.organizer_id);
  checkHttpUrl(v, 'conference_url', req.conference_url, LIMITS.url);
  checkCoordinate(v, 'location_lat', req.location_lat, 90);
  checkCoordinate(v, 'location_lng', req.location_lng, 180);
  checkEnum(v, 'event_type', req.event_type, eventTypes, false);
  checkEnum(v, 'status', req.status, statuses, false);
  checkEnum(v, 'availability', req.availability, availabilities, false);
  checkEnum(v, 'visibility', req.visibility, visibilities, false);
  checkReminders(v, req.reminders);
  if (req.exdates.length > LIMITS.exdates) v.add('exdates', `must have at most ${LIMITS.exdates} dates`);
  for (const f of ['start_at', 'end_at', 'start_date', 'end_date'] as const) checkYears(v, f, req[f]);
  req.exdates.forEach((at, i) => checkYears(v, `exdates[${i}]`, at));
  if ('recurrence_id' in req) checkYears(v, 'recurrence_id', req.recurrence_id);
  return checkMetadata(v, 'metadata', req.metadata);
}
