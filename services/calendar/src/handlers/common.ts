import type { Pool } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { enumMapping, type Handlers } from '@workauto/grpc';
import { resourceJson } from '@workauto/protos';
import {
  Availability,
  Calendar,
  CalendarEvent,
  EventStatus,
  EventType,
  ReminderMethod,
  UpdateScope,
  Visibility,
  type CalendarServiceService,
} from '@workauto/protos/workauto/calendar/v1/calendar.js';
import type { Occurrence } from '../domain/recurrence.js';
import type { CalendarRow } from '../repo/calendars.js';
import type { EventRow } from '../repo/events.js';

export const SOURCE = 'calendar';
export const eventTypes = enumMapping(EventType);
export const statuses = enumMapping(EventStatus);
export const availabilities = enumMapping(Availability);
export const visibilities = enumMapping(Visibility);
export const reminderMethods = enumMapping(ReminderMethod);
export const scopes = enumMapping(UpdateScope);

/** Limits the handlers enforce (docs/calendar.md); fields' lengths and ranges are the proto's rules. */
export const LIMITS = {
  exdates: 1_000,
};

export interface CalendarDeps {
  pool: Pool;
  logger: Logger;
  /** The clock next_occurrence is computed against (tests pin it). */
  now?: () => Date;
}

type H = Handlers<typeof CalendarServiceService>;
/** The handler of one rpc. */
export type Handler<K extends keyof H> = H[K];

export function toCalendar(row: CalendarRow): Calendar {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    description: row.description ?? undefined,
    timezone: row.timezone,
    color: row.color ?? undefined,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/**
 * The API's CalendarEvent of a stored row; a listed occurrence of a series is the master's record
 * with the occurrence's times, series_id = the master and recurrence_id = its original start.
 */
export function toEvent(
  row: EventRow,
  extra: { next_occurrence?: Date | null; occurrence?: Occurrence } = {},
): CalendarEvent {
  const o = extra.occurrence;
  const times = o
    ? o.is_all_day
      ? { start_date: o.start_date, end_date: o.end_date }
      : { start_at: o.start_at, end_at: o.end_at }
    : {
        start_at: row.start_at ?? undefined,
        end_at: row.end_at ?? undefined,
        start_date: row.start_date ?? undefined,
        end_date: row.end_date ?? undefined,
      };
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    calendar_id: row.calendar_id,
    title: row.title,
    event_type: eventTypes.fromDomain(row.event_type),
    status: statuses.fromDomain(row.status),
    availability: availabilities.fromDomain(row.availability),
    visibility: visibilities.fromDomain(row.visibility),
    is_all_day: row.is_all_day,
    sequence: row.sequence,
    metadata: row.metadata,
    reminders: row.reminders.map((r) => ({ method: reminderMethods.fromDomain(r.method), minutes: r.minutes })),
    created_at: row.created_at,
    updated_at: row.updated_at,
    color: row.color ?? undefined,
    conference_url: row.conference_url ?? undefined,
    description: row.description ?? undefined,
    location: row.location ?? undefined,
    timezone: row.timezone,
    rrule: row.rrule ?? undefined,
    ical_uid: row.ical_uid,
    location_lat: row.location_lat ?? undefined,
    location_lng: row.location_lng ?? undefined,
    ...times,
    next_occurrence: extra.next_occurrence ?? undefined,
    recurrence_id: o ? o.recurrence_id : (row.recurrence_id ?? undefined),
    series_id: o ? row.id : (row.series_id ?? undefined),
    deleted_at: row.deleted_at ?? undefined,
    exdates: row.exdates,
    organizer_id: row.organizer_id ?? undefined,
  };
}

// Event data is the resource exactly as the REST API returns it (docs/events.md).
export const calendarData = (row: CalendarRow) => resourceJson(Calendar, toCalendar(row));
export const eventData = (event: CalendarEvent) => resourceJson(CalendarEvent, event);
