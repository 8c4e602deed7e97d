import type { Queryable } from '@workauto/db';
import { errors, validate, type CallContext, type Handlers } from '@workauto/grpc';
import type { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import type { HttpBody } from '@workauto/protos/google/api/httpbody.js';
import { getVtimezoneComponent } from '@touch4it/ical-timezones';
import ical, {
  ICalEventBusyStatus,
  ICalEventClass,
  ICalEventStatus,
  ICalEventTransparency,
  foldLines,
  type ICalCalendar,
  type ICalEvent,
} from 'ical-generator';
import { Temporal } from 'temporal-polyfill';
import * as calendars from '../repo/calendars.js';
import * as events from '../repo/events.js';
import type { EventRow } from '../repo/events.js';
import type { CalendarDeps } from './common.js';

type H = Handlers<typeof CalendarServiceService>;

const instant = (d: Date) => Temporal.Instant.fromEpochMilliseconds(d.getTime());
const plainDate = (s: string) => Temporal.PlainDate.from(s);
const compact = (s: string) => s.replace(/[-:]/g, '');

/** RFC 5545 values of the exdates: local date-times with the event's TZID, UTC with Z, or dates for all-day events. */
function exdateLine(row: EventRow): string {
  if (row.is_all_day)
    return `EXDATE;VALUE=DATE:${row.exdates.map((d) => compact(instant(d).toZonedDateTimeISO(row.timezone).toPlainDate().toString())).join(',')}`;
  if (row.timezone === 'UTC')
    return `EXDATE:${row.exdates.map((d) => compact(d.toISOString().replace(/\.\d{3}Z$/, 'Z'))).join(',')}`;
  const local = (d: Date) =>
    compact(instant(d).toZonedDateTimeISO(row.timezone).toPlainDateTime().toString({ smallestUnit: 'second' }));
  return `EXDATE;TZID=${row.timezone}:${row.exdates.map(local).join(',')}`;
}

/** The stored rule as RFC 5545 needs it: an all-day series' UNTIL as a DATE (the API also accepts a UTC one). */
function ruleLine(row: EventRow): string {
  if (!row.is_all_day) return `RRULE:${row.rrule}`;
  return `RRULE:${row.rrule!.replace(/UNTIL=(\d{8})T\d{6}Z/i, (_m, _d) => {
    const utc = /UNTIL=(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z/i.exec(row.rrule!)!;
    const at = Temporal.Instant.from(`${utc[1]}-${utc[2]}-${utc[3]}T${utc[4]}:${utc[5]}:${utc[6]}Z`);
    return `UNTIL=${compact(at.toZonedDateTimeISO(row.timezone).toPlainDate().toString())}`;
  })}`;
}

/** Adds a stored event to an ical-generator calendar as a VEVENT. */
function addEvent(cal: ICalCalendar, row: EventRow): ICalEvent {
  const event = cal.createEvent({
    id: row.ical_uid,
    sequence: row.sequence,
    summary: row.title,
    stamp: row.updated_at,
    created: row.created_at,
    lastModified: row.updated_at,
    allDay: row.is_all_day,
    ...(row.is_all_day
      ? { start: plainDate(row.start_date!), end: plainDate(row.end_date!), floating: true }
      : { start: instant(row.start_at!), end: instant(row.end_at!), timezone: row.timezone }),
    status:
      {
        confirmed: ICalEventStatus.CONFIRMED,
        tentative: ICalEventStatus.TENTATIVE,
        cancelled: ICalEventStatus.CANCELLED,
      }[row.status] ?? null,
    transparency: row.availability === 'free' ? ICalEventTransparency.TRANSPARENT : ICalEventTransparency.OPAQUE,
    busystatus:
      row.event_type === 'out_of_office'
        ? ICalEventBusyStatus.OOF
        : row.availability === 'free'
          ? ICalEventBusyStatus.FREE
          : ICalEventBusyStatus.BUSY,
    class:
      { public: ICalEventClass.PUBLIC, private: ICalEventClass.PRIVATE, confidential: ICalEventClass.CONFIDENTIAL }[
        row.visibility
      ] ?? null,
    ...(row.description ? { description: row.description } : {}),
    ...(row.location || row.location_lat !== null
      ? {
          location: {
            title: row.location ?? '',
            ...(row.location_lat !== null && row.location_lng !== null
              ? { geo: { lat: row.location_lat, lon: row.location_lng } }
              : {}),
          },
        }
      : {}),
    ...(row.conference_url ? { url: row.conference_url } : {}),
  });
  if (row.rrule) event.repeating([ruleLine(row), ...(row.exdates.length ? [exdateLine(row)] : [])].join('\n'));
  if (row.recurrence_id) {
    event.recurrenceId(
      row.is_all_day
        ? instant(row.recurrence_id).toZonedDateTimeISO(row.timezone).toPlainDateTime()
        : instant(row.recurrence_id),
    );
  }
  return event;
}

/*
 * The feed is written in pieces, so that it streams: the head (VCALENDAR with the calendar's
 * properties and a VTIMEZONE for each zone its events use: clients such as ical.js read a TZID
 * without one as floating), the VEVENTs batch by batch, and the tail (the VTIMEZONEs of zones an
 * event took on while the feed was read, and END:VCALENDAR). ical-generator renders every part.
 */

/** BEGIN:VCALENDAR, the calendar's properties and the VTIMEZONEs of `zones`. */
export function feedHead(calendar: calendars.CalendarRow, zones: Iterable<string>): string {
  const cal = ical({ name: calendar.name, prodId: { company: 'workauto', product: 'calendar' } });
  if (calendar.description) cal.description(calendar.description);
  return cal.toString().replace(/END:VCALENDAR$/, '') + vtimezones(zones);
}

/** The VTIMEZONE components of some zones (none for UTC, which needs none). */
function vtimezones(zones: Iterable<string>): string {
  let text = '';
  for (const zone of zones) {
    const component = getVtimezoneComponent(zone);
    if (component) text += component.replace(/\r?\n/g, '\r\n').trim() + '\r\n';
  }
  return foldLines(text);
}

/**
 * The VEVENTs of some stored events, and the zones they name. One gap of ical-generator is closed
 * here: it writes every RECURRENCE-ID as a date-time, and an all-day exception's must be a DATE
 * (its master's DTSTART is); all-day exceptions are floating, so theirs came out as a local
 * midnight without TZID.
 */
export function feedEvents(rows: EventRow[]): { text: string; zones: Set<string> } {
  const cal = ical();
  const added = rows.map((row) => addEvent(cal, row));
  const text = foldLines(added.map((e) => e.toString()).join('')).replace(
    /^RECURRENCE-ID:(\d{8})T000000\r$/gm,
    'RECURRENCE-ID;VALUE=DATE:$1\r',
  );
  return { text, zones: new Set(added.flatMap((e) => (e.allDay() ? [] : [e.timezone()].filter((z) => z !== null)))) };
}

/** The VTIMEZONEs of zones the head did not have, and END:VCALENDAR. */
export function feedTail(lateZones: Iterable<string>): string {
  return `${vtimezones(lateZones)}END:VCALENDAR\r\n`;
}

/** The whole feed of some events in one text (tests; the service streams feedText). */
export function renderFeed(calendar: calendars.CalendarRow, rows: EventRow[]): string {
  const events = feedEvents(rows);
  return feedHead(calendar, events.zones) + events.text + feedTail([]);
}

/**
 * The calendar's feed as text pieces, reading its events in keyset batches: memory holds one batch,
 * whatever the calendar's size. Every live event of the calendar is in it; an event written while
 * the feed is read may or may not be.
 */
async function* feedText(db: Queryable, tenantId: string, calendar: calendars.CalendarRow): AsyncGenerator<string> {
  const zones = new Set(await events.feedZones(db, tenantId, calendar.id));
  yield feedHead(calendar, zones);
  const late = new Set<string>();
  let after: string | undefined;
  for (;;) {
    const rows = await events.feedBatch(db, tenantId, calendar.id, after, FEED_BATCH);
    if (rows.length === 0) break;
    const batch = feedEvents(rows);
    yield batch.text;
    for (const zone of batch.zones) if (!zones.has(zone)) late.add(zone);
    after = rows[rows.length - 1]!.id;
    if (rows.length < FEED_BATCH) break;
  }
  yield feedTail(late);
}

/** Events read per query while a feed streams. */
const FEED_BATCH = 100;
/** Text gathered before a chunk is sent. */
const CHUNK_BYTES = 256 * 1024;
/** The most the deprecated one-message GetCalendarFeed answers (a gRPC message may hold 4 MiB). */
const ONE_MESSAGE_MAX_BYTES = 3 * 1024 * 1024;
const CONTENT_TYPE = 'text/calendar; charset=utf-8';

export function feedHandlers({ pool }: CalendarDeps): Pick<H, 'streamCalendarFeed' | 'getCalendarFeed'> {
  /** The feed in chunks of about CHUNK_BYTES; a calendar that is not the tenant's is a 404 before the first. */
  async function* chunks(id: string, ctx: CallContext): AsyncGenerator<HttpBody> {
    validate().uuid('id', id, { required: true }).done();
    const calendar = await calendars.findCalendar(pool, ctx.tenant, id.toLowerCase());
    if (!calendar) throw errors.notFound('calendar', id);
    let pending: Buffer[] = [];
    let size = 0;
    for await (const text of feedText(pool, ctx.tenant, calendar)) {
      const bytes = Buffer.from(text);
      pending.push(bytes);
      size += bytes.length;
      if (size >= CHUNK_BYTES) {
        yield { content_type: CONTENT_TYPE, data: Buffer.concat(pending), extensions: [] };
        pending = [];
        size = 0;
      }
    }
    if (size > 0) yield { content_type: CONTENT_TYPE, data: Buffer.concat(pending), extensions: [] };
  }

  return {
    streamCalendarFeed: (req, ctx) => chunks(req.id, ctx),

    async getCalendarFeed(req, ctx) {
      const parts: Buffer[] = [];
      let size = 0;
      for await (const chunk of chunks(req.id, ctx)) {
        size += chunk.data.length;
        if (size > ONE_MESSAGE_MAX_BYTES)
          throw errors.failedPrecondition(
            'FEED_TOO_LARGE',
            'the feed is larger than one message may hold: read it with StreamCalendarFeed (GET /calendars/{id}/events.ics)',
          );
        parts.push(Buffer.from(chunk.data));
      }
      return { content_type: CONTENT_TYPE, data: Buffer.concat(parts), extensions: [] };
    },
  };
}
