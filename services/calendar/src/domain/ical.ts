import { getVtimezoneComponent } from '@touch4it/ical-timezones';
import ical, {
  ICalEventBusyStatus,
  ICalEventClass,
  ICalEventStatus,
  ICalEventTransparency,
  type ICalCalendar,
  type ICalEvent,
} from 'ical-generator';
import { Temporal } from 'temporal-polyfill';
import type { CalendarRow } from '../repo/calendars.js';
import type { EventRow } from '../repo/events.js';

/** The iCalendar feed (RFC 5545) of stored calendars and events, rendered by ical-generator. Pure. */

const instant = (d: Date) => Temporal.Instant.fromEpochMilliseconds(d.getTime());
const plainDate = (s: string) => Temporal.PlainDate.from(s);
const compact = (s: string) => s.replace(/[-:]/g, '');

/** The longest content line in octets, before its CRLF (RFC 5545 §3.1 allows 75; ical-generator writes 74). */
const LINE_OCTETS = 74;

/**
 * Content lines folded as ical-generator's foldLines folds them (the same output, tested), at a
 * tenth of its cost: it builds each long line a character at a time, which made a feed of long
 * descriptions hold the service's event loop for hundreds of milliseconds. Folds between UTF-8
 * sequences, never inside one.
 */
export function foldLines(text: string): string {
  const lines = text.split('\r\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.length <= LINE_OCTETS && Buffer.byteLength(line) <= LINE_OCTETS) continue;
    const bytes = Buffer.from(line);
    if (bytes.length <= LINE_OCTETS) continue;
    const parts: string[] = [];
    for (let start = 0; start < bytes.length;) {
      let end = Math.min(bytes.length, start + LINE_OCTETS);
      while (end < bytes.length && (bytes[end]! & 0xc0) === 0x80) end--; // a UTF-8 continuation byte
      parts.push(bytes.toString('utf8', start, end));
      start = end;
    }
    lines[i] = parts.join('\r\n ');
  }
  return lines.join('\r\n');
}

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
export function feedHead(calendar: CalendarRow, zones: Iterable<string>): string {
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
export function renderFeed(calendar: CalendarRow, rows: EventRow[]): string {
  const events = feedEvents(rows);
  return feedHead(calendar, events.zones) + events.text + feedTail([]);
}
