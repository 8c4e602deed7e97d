import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { foldLines as libraryFold } from 'ical-generator';
import { foldLines, renderFeed } from './domain/ical.js';
import type { CalendarRow } from './repo/calendars.js';
import type { EventRow } from './repo/events.js';

const base = {
  tenant_id: 't',
  calendar_id: 'c',
  description: null,
  location: null,
  location_lat: null,
  location_lng: null,
  conference_url: null,
  color: null,
  event_type: 'default',
  status: 'confirmed',
  availability: 'busy',
  visibility: 'default',
  reminders: [],
  organizer_id: null,
  sequence: 0,
  metadata: {},
  span_start: new Date(),
  span_end: null,
  created_at: new Date('2026-01-01T00:00:00Z'),
  updated_at: new Date('2026-01-02T00:00:00Z'),
  deleted_at: null,
  indexed_from: null,
  indexed_until: null,
  is_all_day: false,
  start_at: null,
  end_at: null,
  start_date: null,
  end_date: null,
  rrule: null,
  exdates: [],
  series_id: null,
  recurrence_id: null,
} satisfies Partial<EventRow>;
const calendar = { name: 'Cal', description: null } as CalendarRow;

describe('iCalendar feed text', () => {
  it('folds content lines as ical-generator does: 74 octets, never inside a UTF-8 sequence', () => {
    const lines: string[] = [];
    for (const unit of ['a', 'é', '€', '😀', 'a😀', 'ab€'])
      for (let n = 0; n < 200; n += 7) lines.push(`DESCRIPTION:${unit.repeat(n)}`);
    for (const text of [...lines, lines.join('\r\n'), '']) assert.equal(foldLines(text), libraryFold(text));
    const folded = foldLines(`X:${'😀'.repeat(100)}`).split('\r\n');
    assert.ok(folded.length > 1 && folded.every((l) => Buffer.byteLength(l) <= 75), folded.join('|'));
    assert.ok(!folded.join('').includes('\uFFFD'), 'no sequence cut in two');
  });

  it('writes all-day series as RFC 5545 needs them: DATE UNTIL, DATE EXDATE and a DATE RECURRENCE-ID', () => {
    const text = renderFeed(calendar, [
      {
        ...base,
        id: 'm1',
        ical_uid: 'm1@workauto',
        title: 'Offsite',
        is_all_day: true,
        start_date: '2026-10-28',
        end_date: '2026-10-30',
        timezone: 'America/New_York',
        rrule: 'FREQ=WEEKLY;UNTIL=20261125T000000Z',
        exdates: [new Date('2026-11-11T05:00:00Z')],
      },
      {
        ...base,
        id: 'x1',
        ical_uid: 'm1@workauto',
        series_id: 'm1',
        recurrence_id: new Date('2026-11-04T05:00:00Z'),
        title: 'Remote',
        is_all_day: true,
        start_date: '2026-11-04',
        end_date: '2026-11-06',
        timezone: 'America/New_York',
      },
    ]);
    assert.match(text, /DTSTART;VALUE=DATE:20261028\r\n/);
    assert.match(text, /RRULE:FREQ=WEEKLY;UNTIL=20261124\r\n/, 'the UTC UNTIL falls on Nov 24 in New York');
    assert.match(text, /EXDATE;VALUE=DATE:20261111\r\n/);
    assert.match(text, /RECURRENCE-ID;VALUE=DATE:20261104\r\n/);
  });

  it('writes timed events with their TZID and a VTIMEZONE, and UTC ones in UTC form', () => {
    const text = renderFeed(calendar, [
      {
        ...base,
        id: 'w',
        ical_uid: 'w@workauto',
        title: 'Weekly',
        start_at: new Date('2026-10-26T13:00:00Z'),
        end_at: new Date('2026-10-26T14:00:00Z'),
        timezone: 'America/New_York',
        rrule: 'FREQ=WEEKLY',
        exdates: [new Date('2026-11-09T14:00:00Z')],
        sequence: 3,
      },
      {
        ...base,
        id: 'x',
        ical_uid: 'w@workauto',
        series_id: 'w',
        recurrence_id: new Date('2026-11-02T14:00:00Z'),
        title: 'Moved',
        start_at: new Date('2026-11-02T16:00:00Z'),
        end_at: new Date('2026-11-02T17:00:00Z'),
        timezone: 'America/New_York',
        sequence: 4,
      },
      {
        ...base,
        id: 'u',
        ical_uid: 'u@workauto',
        title: 'UTC',
        start_at: new Date('2026-11-01T12:00:00Z'),
        end_at: new Date('2026-11-01T12:15:00Z'),
        timezone: 'UTC',
        rrule: 'FREQ=DAILY;COUNT=3',
        exdates: [new Date('2026-11-02T12:00:00Z')],
      },
    ]);
    assert.match(text, /BEGIN:VTIMEZONE\r\nTZID:America\/New_York/);
    assert.match(text, /DTSTART;TZID=America\/New_York:20261026T090000\r\n/);
    assert.match(
      text,
      /EXDATE;TZID=America\/New_York:20261109T090000\r\n/,
      'the exdate in local time across the DST change',
    );
    assert.match(text, /RECURRENCE-ID;TZID=America\/New_York:20261102T090000\r\n/);
    assert.match(text, /SEQUENCE:4\r\n/);
    assert.match(text, /DTSTART:20261101T120000Z\r\n/);
    assert.match(text, /EXDATE:20261102T120000Z\r\n/);
  });
});
