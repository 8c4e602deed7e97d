import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import ICAL from 'ical.js';
import {
  assertError,
  fails,
  ok,
  assertRecord,
  startTestStack,
  violations,
  type TenantFixture,
  type TestStack,
} from './harness.js';
import { hasPython, parseWithPythonIcalendar as parsePythonFeed } from './python-icalendar.js';

const EVENT_FIELDS = {
  id: 'uuid',
  tenant_id: 'uuid',
  calendar_id: 'uuid',
  title: 'string',
  event_type: 'string',
  status: 'string',
  availability: 'string',
  visibility: 'string',
  is_all_day: 'boolean',
  sequence: 'integer',
  metadata: 'object',
  reminders: 'array',
  created_at: 'date-time',
  updated_at: 'date-time',
} as const;

/** Occurrences of an iCalendar text in [from, to), expanded by ical.js (an independent RFC 5545 implementation). */
function icsOccurrences(text: string, from: Date, to: Date): string[] {
  const root = new ICAL.Component(ICAL.parse(text));
  for (const tz of root.getAllSubcomponents('vtimezone')) ICAL.TimezoneService.register(tz);
  const vevents = root.getAllSubcomponents('vevent').map((v) => new ICAL.Event(v));
  const exceptions = vevents.filter((e) => e.isRecurrenceException());
  const out: string[] = [];
  const line = (title: string, start: ICAL.Time, end: ICAL.Time) =>
    start.isDate
      ? `${title} ${start.toString()}..${end.toString()}`
      : `${title} ${start.toJSDate().toISOString()}..${end.toJSDate().toISOString()}`;
  const overlaps = (start: ICAL.Time, end: ICAL.Time) => start.toJSDate() < to && end.toJSDate() > from;
  for (const ev of vevents) {
    if (ev.isRecurrenceException()) continue;
    if (!ev.isRecurring()) {
      if (overlaps(ev.startDate, ev.endDate)) out.push(line(ev.summary, ev.startDate, ev.endDate));
      continue;
    }
    for (const ex of exceptions) if (ex.uid === ev.uid) ev.relateException(ex);
    const it = ev.iterator();
    for (let next = it.next(); next && next.toJSDate() < to; next = it.next()) {
      const o = ev.getOccurrenceDetails(next);
      if (overlaps(o.startDate, o.endDate)) out.push(line(o.item.summary, o.startDate, o.endDate));
    }
  }
  // Exceptions moved into the window from an occurrence outside it.
  for (const ex of exceptions) {
    const line2 = line(ex.summary, ex.startDate, ex.endDate);
    if (overlaps(ex.startDate, ex.endDate) && !out.includes(line2)) out.push(line2);
  }
  return out.sort();
}

describe('calendar through the gateway', () => {
  let stack: TestStack;
  let a: TenantFixture;
  let b: TenantFixture;
  before(async () => {
    stack = await startTestStack();
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
  });
  after(() => stack.stop());
  const call = (method: string, path: string, key: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) });

  it('serves calendars: create, list, get, patch, delete (which takes the events)', async () => {
    const api = stack.client(a.key);
    const created = await ok(
      api.POST('/api/v1/calendars', {
        body: {
          name: 'Team',
          description: 'Our team',
          timezone: 'America/New_York',
          color: '#336699',
          metadata: { k: 1 },
        },
      }),
      201,
    );
    assertRecord(
      created,
      {
        id: 'uuid',
        tenant_id: 'uuid',
        name: 'string',
        timezone: 'string',
        metadata: 'object',
        created_at: 'date-time',
        updated_at: 'date-time',
      },
      'Calendar',
    );
    const calendar = { params: { path: { id: created.id } } };
    assert.equal((await ok(api.GET('/api/v1/calendars/{id}', calendar))).name, 'Team');
    const list = await ok(api.GET('/api/v1/calendars', { params: { query: { limit: 1 } } }));
    assert.deepEqual([list.data.length, list.has_more, list.next_cursor], [1, false, null]);
    const patched = await ok(
      api.PATCH('/api/v1/calendars/{id}', { ...calendar, body: { description: null, timezone: 'Europe/Berlin' } }),
    );
    assert.deepEqual([patched.description ?? null, patched.timezone], [null, 'Europe/Berlin']);
    const ev = await ok(
      api.POST('/api/v1/events', {
        body: { calendar_id: created.id, title: 'E', start_at: '2026-06-01T09:00:00Z', end_at: '2026-06-01T10:00:00Z' },
      }),
      201,
    );
    assert.equal(ev.timezone, 'Europe/Berlin');
    assert.equal((await api.DELETE('/api/v1/calendars/{id}', calendar)).response.status, 204);
    await fails(api.GET('/api/v1/calendars/{id}', calendar), 404);
    await fails(api.GET('/api/v1/events/{id}', { params: { path: { id: ev.id } } }), 404);
  });

  it('serves events: create, list occurrences, get, PUT with scopes and nulls, DELETE with scopes', async () => {
    const api = stack.client(a.key);
    const cal = await ok(api.POST('/api/v1/calendars', { body: { name: 'Work', timezone: 'America/New_York' } }), 201);
    const m = await ok(
      api.POST('/api/v1/events', {
        body: {
          calendar_id: cal.id,
          title: 'Weekly',
          start_at: '2026-10-26T13:00:00Z',
          end_at: '2026-10-26T14:00:00Z',
          rrule: 'FREQ=WEEKLY;COUNT=4',
          description: 'Sync',
          location: 'Room 1',
          location_lat: 40.7,
          location_lng: -74,
          conference_url: 'https://meet.example/x',
          color: 'blue',
          event_type: 'focus_time',
          status: 'tentative',
          availability: 'free',
          visibility: 'private',
          reminders: [{ method: 'email', minutes: 30 }],
          metadata: { a: 1 },
        },
      }),
      201,
    );
    assertRecord(m, EVENT_FIELDS, 'CalendarEvent');
    assert.deepEqual(
      [m.event_type, m.status, m.availability, m.visibility, m.sequence, m.reminders, m.rrule, m.exdates],
      ['focus_time', 'tentative', 'free', 'private', 0, [{ method: 'email', minutes: 30 }], 'FREQ=WEEKLY;COUNT=4', []],
    );
    assert.match(String(m.ical_uid), /@workauto$/);

    const window = { from: '2026-10-01T00:00:00Z', to: '2026-12-01T00:00:00Z', calendar_id: cal.id };
    const events = (query: { limit?: number; cursor?: string } = {}) =>
      ok(api.GET('/api/v1/events', { params: { query: { ...window, ...query } } }));
    const listed = await events();
    // 09:00 New York each week, across the fall-back on Nov 1: the UTC hour moves from 13 to 14.
    assert.deepEqual(
      listed.data.map((e) => e.start_at),
      [
        '2026-10-26T13:00:00.000000Z',
        '2026-11-02T14:00:00.000000Z',
        '2026-11-09T14:00:00.000000Z',
        '2026-11-16T14:00:00.000000Z',
      ],
    );
    assert.ok(listed.data.every((e) => e.id === m.id && e.series_id === m.id && e.recurrence_id === e.start_at));
    assert.deepEqual([listed.has_more, listed.next_cursor], [false, null]);
    const page = await events({ limit: 3 });
    const rest = await events({ limit: 3, cursor: page.next_cursor! });
    assert.deepEqual(
      [...page.data, ...rest.data].map((e) => e.start_at),
      listed.data.map((e) => e.start_at),
    );
    const occurrence = (i: number) => listed.data[i]!.recurrence_id!;

    const event = (id: string) => ({ params: { path: { id } } });
    const ex = await ok(
      api.PUT('/api/v1/events/{id}', {
        ...event(m.id),
        body: {
          update_scope: 'this',
          recurrence_id: occurrence(1),
          title: 'Moved',
          start_at: '2026-11-02T15:00:00Z',
          end_at: '2026-11-02T16:00:00Z',
          description: null,
        },
      }),
    );
    assert.deepEqual(
      [ex.series_id, ex.recurrence_id, ex.title, ex.description ?? null, ex.location, ex.sequence],
      [m.id, occurrence(1), 'Moved', null, 'Room 1', 1],
    );
    const all = await ok(api.PUT('/api/v1/events/{id}', { ...event(m.id), body: { location: null, reminders: [] } }));
    assert.deepEqual(
      [all.location ?? null, all.reminders, all.sequence, all.title],
      [null, [], 1, 'Weekly'],
      'default scope all; null and [] clear',
    );
    assert.equal(
      (await ok(api.GET('/api/v1/events/{id}', event(ex.id)))).location ?? null,
      null,
      'the exception got the change too',
    );
    const following = await ok(
      api.PUT('/api/v1/events/{id}', {
        ...event(m.id),
        body: { update_scope: 'this_and_following', recurrence_id: occurrence(2), title: 'Later' },
      }),
    );
    assert.deepEqual([following.rrule, following.sequence], ['FREQ=WEEKLY;COUNT=2', 2]);
    assert.deepEqual(
      (await events()).data.map((e) => `${e.title} ${e.recurrence_id}`),
      [`Weekly ${occurrence(0)}`, `Moved ${occurrence(1)}`, `Later ${occurrence(2)}`, `Later ${occurrence(3)}`],
    );

    const remove = (id: string, query?: { update_scope: 'this' | 'this_and_following'; recurrence_id: string }) =>
      api.DELETE('/api/v1/events/{id}', { params: { path: { id }, ...(query ? { query } : {}) } });
    assert.equal(
      (await remove(following.id, { update_scope: 'this', recurrence_id: occurrence(3) })).response.status,
      204,
    );
    assert.equal((await ok(api.GET('/api/v1/events/{id}', event(following.id)))).exdates.length, 1);
    assert.equal(
      (await remove(m.id, { update_scope: 'this_and_following', recurrence_id: occurrence(1) })).response.status,
      204,
    );
    await fails(api.GET('/api/v1/events/{id}', event(ex.id)), 404);
    assert.equal((await remove(m.id)).response.status, 204);
    await fails(api.GET('/api/v1/events/{id}', event(m.id)), 404);
    assert.deepEqual(
      (await events()).data.map((e) => e.title),
      ['Later'],
    );
  });

  it('serves the calendar as iCalendar text that an independent parser expands to the same occurrences as GET /events', async () => {
    const cal = (await call('POST', '/calendars', a.key, { name: 'Feed', timezone: 'America/New_York' })).body;
    const post = async (body: Record<string, unknown>) => {
      const res = await call('POST', '/events', a.key, { calendar_id: cal.id, ...body });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body;
    };
    const weekly = await post({
      title: 'Weekly NY',
      start_at: '2026-10-19T13:00:00Z',
      end_at: '2026-10-19T13:30:00Z',
      rrule: 'FREQ=WEEKLY;BYDAY=MO',
      exdates: ['2026-11-09T14:00:00Z'],
    });
    await post({
      title: 'Berlin daily',
      start_at: '2026-10-23T07:00:00Z',
      end_at: '2026-10-23T08:00:00Z',
      timezone: 'Europe/Berlin',
      rrule: 'FREQ=DAILY;COUNT=6',
    });
    const allDay = await post({
      title: 'Offsite',
      start_date: '2026-10-28',
      end_date: '2026-10-30',
      rrule: 'FREQ=WEEKLY;UNTIL=20261125T000000Z',
    });
    await post({ title: 'One-off', start_at: '2026-11-03T17:00:00Z', end_at: '2026-11-03T18:00:00Z' });
    await post({ title: 'Holiday', start_date: '2026-11-26', end_date: '2026-11-27' });
    const utc = await post({
      title: 'UTC series',
      start_at: '2026-11-01T12:00:00Z',
      end_at: '2026-11-01T12:15:00Z',
      timezone: 'UTC',
      rrule: 'FREQ=WEEKLY;COUNT=3',
      exdates: ['2026-11-08T12:00:00Z'],
    });
    assert.equal(utc.timezone, 'UTC');
    // Exceptions: a moved timed occurrence, a renamed all-day one.
    await call('PUT', `/events/${weekly.id}`, a.key, {
      update_scope: 'this',
      recurrence_id: '2026-11-02T14:00:00Z',
      title: 'Weekly moved',
      start_at: '2026-11-02T16:00:00Z',
      end_at: '2026-11-02T17:00:00Z',
    });
    const offsiteRid = (
      await call('GET', `/events?from=2026-11-04T00:00:00Z&to=2026-11-06T00:00:00Z&calendar_id=${cal.id}`, a.key)
    ).body.data.find((e: any) => e.id === allDay.id).recurrence_id;
    const renamed = await call('PUT', `/events/${allDay.id}`, a.key, {
      update_scope: 'this',
      recurrence_id: offsiteRid,
      title: 'Offsite (remote)',
    });
    assert.equal(renamed.status, 200, JSON.stringify(renamed.body));

    const res = await fetch(`${stack.url}/api/v1/calendars/${cal.id}/events.ics`, {
      headers: { authorization: `Bearer ${a.key}` },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/calendar/);
    const text = await res.text();
    assert.match(text, /^BEGIN:VCALENDAR\r\n/);
    assert.match(text, /BEGIN:VTIMEZONE\r\nTZID:America\/New_York/);
    assert.match(text, /EXDATE;TZID=America\/New_York:20261109T090000/);
    assert.match(text, /RECURRENCE-ID;TZID=America\/New_York:20261102T090000/);
    assert.match(text, /RECURRENCE-ID;VALUE=DATE:20261104/);

    const from = new Date('2026-10-15T00:00:00Z');
    const to = new Date('2026-12-01T00:00:00Z');
    const api: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await call(
        'GET',
        `/events?from=${from.toISOString()}&to=${to.toISOString()}&calendar_id=${cal.id}&limit=7${cursor ? `&cursor=${cursor}` : ''}`,
        a.key,
      );
      for (const e of page.body.data)
        api.push(
          e.is_all_day
            ? `${e.title} ${e.start_date}..${e.end_date}`
            : `${e.title} ${new Date(e.start_at).toISOString()}..${new Date(e.end_at).toISOString()}`,
        );
      cursor = page.body.next_cursor ?? undefined;
    } while (cursor);
    assert.deepEqual(icsOccurrences(text, from, to), api.sort());
    assert.ok(api.includes('Weekly moved 2026-11-02T16:00:00.000Z..2026-11-02T17:00:00.000Z'));
    assert.ok(!api.some((l) => l.startsWith('Weekly NY 2026-11-09')), 'the exdate is gone');

    assertError(await call('GET', `/calendars/${cal.id}/events.ics`, b.key), 404);
    const openapi = (await stack.api('GET', '/api/v1/openapi.json')).body;
    assert.ok(openapi.paths['/api/v1/calendars/{id}/events.ics'].get.responses['200'].content['text/calendar']);
  });

  it('answers a page and the feed of 230 events with long descriptions (over 4 MiB together): the page stops early, the feed streams every event', async () => {
    const big = await stack.createTenant('Big');
    const cal = (await call('POST', '/calendars', big.key, { name: 'Busy', timezone: 'Europe/Berlin' })).body;
    // 20,000 characters each (the field's limit), some of them two UTF-8 bytes: about 4.6 MB of descriptions.
    const description = (i: number) =>
      `Agenda ${i}: ${'Ünterlagen prüfen, Budget besprechen. '.repeat(600)}`.slice(0, 19_995) + ' END.';
    const start = Date.parse('2026-07-01T06:00:00Z');
    const ids: string[] = [];
    for (let i = 0; i < 230; i += 10) {
      const made = await Promise.all(
        Array.from({ length: 10 }, (_, j) =>
          call('POST', '/events', big.key, {
            calendar_id: cal.id,
            title: `Meeting ${i + j}`,
            description: description(i + j),
            start_at: new Date(start + (i + j) * 3_600_000).toISOString(),
            end_at: new Date(start + (i + j) * 3_600_000 + 1_800_000).toISOString(),
          }),
        ),
      );
      for (const res of made) {
        assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 300));
        ids.push(res.body.id);
      }
    }

    const window = `from=2026-07-01T00:00:00Z&to=2026-07-15T00:00:00Z&calendar_id=${cal.id}`;
    const first = await call('GET', `/events?${window}&limit=200`, big.key);
    assert.equal(first.status, 200, JSON.stringify(first.body).slice(0, 300));
    assert.ok(first.body.data.length > 0 && first.body.data.length < 200, `a short page: ${first.body.data.length}`);
    assert.equal(first.body.has_more, true);
    assert.equal(typeof first.body.next_cursor, 'string');
    const listed: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await call('GET', `/events?${window}&limit=200${cursor ? `&cursor=${cursor}` : ''}`, big.key);
      assert.equal(page.status, 200, JSON.stringify(page.body).slice(0, 300));
      for (const e of page.body.data) {
        assert.ok(e.description === description(Number(e.title.split(' ')[1])), `the whole description of ${e.title}`);
        listed.push(e.id);
      }
      cursor = page.body.next_cursor ?? undefined;
    } while (cursor);
    assert.deepEqual(listed, ids, 'every event once, in start order');

    const res = await fetch(`${stack.url}/api/v1/calendars/${cal.id}/events.ics`, {
      headers: { authorization: `Bearer ${big.key}` },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/calendar/);
    const text = await res.text();
    assert.ok(Buffer.byteLength(text) > 4 * 1024 * 1024, 'more than one gRPC message may hold');
    const vevents = new ICAL.Component(ICAL.parse(text)).getAllSubcomponents('vevent').map((v) => new ICAL.Event(v));
    assert.deepEqual(vevents.map((e) => e.uid).sort(), ids.map((id) => `${id}@workauto`).sort(), 'every event');
    for (const e of vevents)
      assert.ok(
        e.description === description(Number(e.summary.split(' ')[1])),
        `the whole description of ${e.summary}`,
      );
  });

  it("renders events at the edges of the accepted years, in zones of extreme offsets, as text ical.js and Python's icalendar both parse", async (t) => {
    const cal = (await call('POST', '/calendars', a.key, { name: 'Edges', timezone: 'UTC' })).body;
    const post = async (body: Record<string, unknown>) => {
      const res = await call('POST', '/events', a.key, { calendar_id: cal.id, ...body });
      assert.equal(res.status, 201, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
      return res.body;
    };
    const hour = (at: string) => new Date(Date.parse(at) + 3_600_000).toISOString();
    const made: any[] = [];
    for (const timezone of ['Pacific/Kiritimati', 'Pacific/Pago_Pago', 'America/New_York', 'Asia/Kathmandu']) {
      for (const start_at of ['1900-01-01T00:00:00.000Z', '2999-12-31T22:00:00.000Z'])
        made.push(await post({ title: `${timezone} ${start_at}`, timezone, start_at, end_at: hour(start_at) }));
    }
    made.push(
      await post({
        title: 'First day',
        start_date: '1900-01-01',
        end_date: '1900-01-02',
        timezone: 'Pacific/Kiritimati',
      }),
      await post({
        title: 'Last days',
        start_date: '2999-12-30',
        end_date: '2999-12-31',
        timezone: 'Pacific/Pago_Pago',
      }),
      await post({
        title: 'Yearly',
        start_date: '1900-01-01',
        end_date: '1900-01-02',
        timezone: 'America/New_York',
        rrule: 'FREQ=YEARLY;UNTIL=29991231',
      }),
      await post({
        title: 'Daily in Kathmandu',
        timezone: 'Asia/Kathmandu',
        start_at: '2999-12-01T22:00:00.000Z',
        end_at: '2999-12-01T23:00:00.000Z',
        rrule: 'FREQ=DAILY;UNTIL=29991231T235959Z',
      }),
    );
    const weekly = await post({
      title: 'Weekly in Kiritimati',
      timezone: 'Pacific/Kiritimati',
      start_at: '1900-01-01T00:00:00.000Z',
      end_at: '1900-01-01T01:00:00.000Z',
      rrule: 'FREQ=WEEKLY;UNTIL=19001231T235959Z',
      exdates: ['1900-01-08T00:00:00.000Z'],
    });
    made.push(weekly);
    const moved = await call('PUT', `/events/${weekly.id}`, a.key, {
      update_scope: 'this',
      recurrence_id: '1900-01-15T00:00:00.000Z',
      title: 'Moved in Kiritimati',
      start_at: '1900-01-15T02:00:00.000Z',
      end_at: '1900-01-15T03:00:00.000Z',
    });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    made.push(moved.body);
    // Outside the years: the events that broke the feed before.
    const outside: [Record<string, string>, string[]][] = [
      [
        { timezone: 'Pacific/Kiritimati', start_at: '9999-12-31T12:00:00Z', end_at: '9999-12-31T13:00:00Z' },
        ['start_at', 'end_at'],
      ],
      [
        { timezone: 'America/New_York', start_at: '0001-01-01T12:00:00Z', end_at: '0001-01-01T13:00:00Z' },
        ['start_at', 'end_at'],
      ],
      [{ start_date: '1899-12-31', end_date: '1900-01-01' }, ['start_date']],
      [
        {
          start_at: '2000-01-03T00:00:00Z',
          end_at: '2000-01-03T01:00:00Z',
          rrule: 'FREQ=WEEKLY;UNTIL=30001231T000000Z',
        },
        ['rrule'],
      ],
    ];
    for (const [body, fields] of outside) {
      const res = await call('POST', '/events', a.key, { calendar_id: cal.id, title: 'Out', ...body });
      assertError(res, 400);
      assert.deepEqual(violations(res), fields, JSON.stringify(body));
    }

    const res = await fetch(`${stack.url}/api/v1/calendars/${cal.id}/events.ics`, {
      headers: { authorization: `Bearer ${a.key}` },
    });
    assert.equal(res.status, 200);
    const text = await res.text();
    const start = (e: any) => (e.start_at ? new Date(e.start_at).toISOString().replace('.000Z', 'Z') : e.start_date);

    // ical.js: every event, with its times; the series expand.
    const root = new ICAL.Component(ICAL.parse(text));
    for (const tz of root.getAllSubcomponents('vtimezone')) ICAL.TimezoneService.register(tz);
    const vevents = root.getAllSubcomponents('vevent').map((v) => new ICAL.Event(v));
    assert.deepEqual(vevents.map((e) => e.summary).sort(), made.map((e) => e.title).sort());
    for (const e of vevents) {
      const api = made.find((m) => m.title === e.summary);
      if (e.startDate.isDate) assert.equal(e.startDate.toString(), api.start_date);
      // Local times after 1970 follow the VTIMEZONEs (see docs/calendar.md for those before).
      else if (api.start_at.startsWith('2999'))
        assert.equal(e.startDate.toJSDate().toISOString(), new Date(api.start_at).toISOString(), e.summary);
      if (e.isRecurring()) {
        const it = e.iterator();
        for (let i = 0; i < 3; i++) assert.ok(it.next(), `${e.summary} expands`);
      }
    }

    // Python's icalendar reads each TZID from its own time zone database: every instant as the API has it.
    if (!hasPython()) return t.skip('python3 is not installed: the Python icalendar check is skipped');
    const parsed = parsePythonFeed(text);
    assert.deepEqual(
      parsed.map((e) => `${e.summary} ${e.start}`).sort(),
      made.map((e) => `${e.title} ${start(e)}`).sort(),
    );
    const py = parsed.find((e) => e.summary === 'Weekly in Kiritimati')!;
    assert.deepEqual([py.rrule, py.exdates], ['FREQ=WEEKLY;UNTIL=19001231T235959Z', ['1900-01-08T00:00:00Z']]);
    assert.equal(parsed.find((e) => e.summary === 'Moved in Kiritimati')!.recurrence_id, '1900-01-15T00:00:00Z');
  });

  it('answers bad input with a 400 naming the field, and never a 5xx', async () => {
    const cal = (await call('POST', '/calendars', a.key, { name: 'Bad' })).body;
    const base = { calendar_id: cal.id, title: 'X', start_at: '2026-06-01T09:00:00Z', end_at: '2026-06-01T10:00:00Z' };
    const bad = async (method: string, path: string, body: unknown, field: string) => {
      const res = await call(method, path, a.key, body);
      assertError(res, 400);
      assert.ok(
        violations(res).includes(field),
        `${method} ${path} ${JSON.stringify(body)} → ${JSON.stringify(violations(res))}, expected ${field}`,
      );
    };
    await bad('POST', '/events', { ...base, status: 'maybe' }, 'status');
    await bad('POST', '/events', { ...base, event_type: 'party' }, 'event_type');
    await bad('POST', '/events', { ...base, reminders: [{ method: 'sms', minutes: 5 }] }, 'reminders[0].method');
    await bad('POST', '/events', { ...base, colour: 'red' }, 'colour');
    await bad('POST', '/events', { ...base, timezone: 'Nowhere/City' }, 'timezone');
    await bad('POST', '/events', { ...base, rrule: 'RRULE:FREQ=DAILY' }, 'rrule');
    await bad('POST', '/events', { ...base, end_at: '2026-06-01T08:00:00Z' }, 'end_at');
    await bad('POST', '/events', { ...base, start_at: 'tomorrow' }, 'start_at');
    await bad(
      'POST',
      '/events',
      { ...base, conference_url: 'https://meet.example/x\r\nX-Injected: 1' },
      'conference_url',
    );
    await bad('POST', '/calendars', { name: 'C', timezone: 'GMT+2' }, 'timezone');
    const ev = (await call('POST', '/events', a.key, { ...base, rrule: 'FREQ=DAILY' })).body;
    await bad('PUT', `/events/${ev.id}`, { update_scope: 'some', title: 'Y' }, 'update_scope');
    await bad('PUT', `/events/${ev.id}`, { update_scope: 'this', title: 'Y' }, 'recurrence_id');
    await bad('PUT', `/events/${ev.id}`, { title: null }, 'title');
    await bad('GET', '/events?from=2026-01-01T00:00:00Z&to=2027-06-01T00:00:00Z', undefined, 'to');
    await bad('GET', '/events?to=2027-06-01T00:00:00Z', undefined, 'from');
    await bad('GET', '/events?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z&cursor=abc', undefined, 'cursor');
    const del = await call('DELETE', `/events/${ev.id}?update_scope=whatever`, a.key);
    assertError(del, 400);
  });

  it('keeps tenants apart and lets a viewer read but not write', async () => {
    const alpha = stack.client(a.key);
    const beta = stack.client(b.key);
    const cal = await ok(alpha.POST('/api/v1/calendars', { body: { name: 'Private' } }), 201);
    const june = { start_at: '2026-06-01T09:00:00Z', end_at: '2026-06-01T10:00:00Z' };
    const ev = await ok(alpha.POST('/api/v1/events', { body: { calendar_id: cal.id, title: 'Secret', ...june } }), 201);
    const event = { params: { path: { id: ev.id } } };
    const calendar = { params: { path: { id: cal.id } } };
    await fails(beta.POST('/api/v1/events', { body: { calendar_id: cal.id, title: 'x', ...june } }), 404);
    await fails(beta.GET('/api/v1/events/{id}', event), 404);
    await fails(beta.PUT('/api/v1/events/{id}', { ...event, body: { title: 'x' } }), 404);
    await fails(beta.DELETE('/api/v1/events/{id}', event), 404);
    await fails(beta.GET('/api/v1/calendars/{id}', calendar), 404);
    await fails(beta.PATCH('/api/v1/calendars/{id}', { ...calendar, body: { name: 'x' } }), 404);
    await fails(beta.DELETE('/api/v1/calendars/{id}', calendar), 404);
    const mayToJuly = { from: '2026-05-01T00:00:00Z', to: '2026-07-01T00:00:00Z' };
    const listed = await ok(beta.GET('/api/v1/events', { params: { query: mayToJuly } }));
    assert.equal(JSON.stringify(listed).includes('Secret'), false);

    /** A new member's API key, with a role and access policies. */
    const join = async (
      role: 'viewer' | 'member',
      access_policies: { domain: 'calendar'; access_level: 'none' }[] = [],
    ) => {
      const invitation = await ok(
        alpha.POST('/api/v1/invitations', {
          body: { email: `${role}-${randomUUID()}@alpha.test`, role, access_policies },
        }),
        201,
      );
      assert.ok(invitation.code, 'the code is shown when the invitation is made');
      return (await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: invitation.code } }))).api_key;
    };
    const viewerKey = await join('viewer');
    const viewer = stack.client(viewerKey);
    await ok(viewer.GET('/api/v1/calendars'));
    assert.ok(
      (await ok(viewer.GET('/api/v1/events', { params: { query: { ...mayToJuly, calendar_id: cal.id } } }))).data.some(
        (e) => e.title === 'Secret',
      ),
    );
    await ok(viewer.GET('/api/v1/events/{id}', event));
    // The feed is iCalendar, not JSON: read as any HTTP client reads it.
    assert.equal((await stack.api('GET', `/api/v1/calendars/${cal.id}/events.ics`, { key: viewerKey })).status, 200);
    await fails(viewer.POST('/api/v1/calendars', { body: { name: 'nope' } }), 403);
    await fails(viewer.POST('/api/v1/events', { body: { calendar_id: cal.id, title: 'x', ...june } }), 403);
    await fails(viewer.PUT('/api/v1/events/{id}', { ...event, body: { title: 'x' } }), 403);
    await fails(viewer.DELETE('/api/v1/events/{id}', event), 403);
    await fails(viewer.PATCH('/api/v1/calendars/{id}', { ...calendar, body: { name: 'x' } }), 403);
    await fails(viewer.DELETE('/api/v1/calendars/{id}', calendar), 403);
    await fails(stack.client().GET('/api/v1/calendars'), 401);

    // A member writes (calendar: write by default); an access policy of none on calendar shuts them out.
    const member = stack.client(await join('member'));
    await ok(
      member.POST('/api/v1/events', {
        body: {
          calendar_id: cal.id,
          title: 'By a member',
          start_at: '2026-06-02T09:00:00Z',
          end_at: '2026-06-02T10:00:00Z',
        },
      }),
      201,
    );
    const noneKey = await join('member', [{ domain: 'calendar', access_level: 'none' }]);
    const none = stack.client(noneKey);
    await fails(none.GET('/api/v1/calendars'), 403);
    await fails(none.GET('/api/v1/events/{id}', event), 403);
    assertError(await stack.api('GET', `/api/v1/calendars/${cal.id}/events.ics`, { key: noneKey }), 403);
  });

  it('finds the notes that mention a real event (GET /backlinks/event/{id})', async () => {
    const alpha = stack.client(a.key);
    const cal = await ok(alpha.POST('/api/v1/calendars', { body: { name: 'Linked' } }), 201);
    const ev = await ok(
      alpha.POST('/api/v1/events', {
        body: {
          calendar_id: cal.id,
          title: 'Kickoff',
          start_at: '2026-06-01T09:00:00Z',
          end_at: '2026-06-01T10:00:00Z',
        },
      }),
      201,
    );
    const note = await ok(
      alpha.POST('/api/v1/notes', { body: { title: 'Agenda', body: `For [[event:${ev.id}|the kickoff]]` } }),
      201,
    );
    const backlinks = { params: { path: { entity_type: 'event' as const, entity_id: ev.id } } };
    const links = await ok(alpha.GET('/api/v1/backlinks/{entity_type}/{entity_id}', backlinks));
    assert.deepEqual(
      links.map((n) => n.id),
      [note.id],
    );
    assert.deepEqual(await ok(stack.client(b.key).GET('/api/v1/backlinks/{entity_type}/{entity_id}', backlinks)), []);
  });
});
