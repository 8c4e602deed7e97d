import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { eventually } from '@workauto/testing';
import { ReminderMethod, type CalendarEvent } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { reindex } from './occurrence-index.js';
import {
  ALL,
  FOLLOWING,
  S,
  THIS,
  badFields,
  ev,
  failure,
  local,
  startCalendar,
  tenant,
  upd,
  type Calendar,
} from './test-support.js';

const NOW = new Date('2026-06-01T00:00:00Z');
const d = (s: string) => new Date(s);
const rids = (list: CalendarEvent[]) => list.map((e) => e.recurrence_id!.toISOString());

describe('calendar events over gRPC', () => {
  let cal: Calendar;
  before(async () => {
    cal = await startCalendar({ now: () => NOW });
  });
  after(() => cal.stop());

  async function calendarOf(t: ReturnType<typeof tenant>, timezone = 'America/New_York') {
    return cal.client.call(S.createCalendar, { name: 'Work', timezone }, t.call);
  }

  it('keeps a weekly 09:00 at 09:00 local across both DST switches in New York and Berlin (the UTC instant moves)', async () => {
    const t = tenant();
    for (const [timezone, startUtc, hours] of [
      ['America/New_York', '2026-02-02T14:00:00Z', [14, 13]],
      ['Europe/Berlin', '2026-02-02T08:00:00Z', [8, 7]],
    ] as const) {
      const c = await calendarOf(t, timezone);
      const start = d(startUtc);
      const master = await cal.client.call(
        S.createEvent,
        ev({
          calendar_id: c.id,
          title: 'Weekly',
          start_at: start,
          end_at: new Date(start.getTime() + 3_600_000),
          rrule: 'FREQ=WEEKLY;BYDAY=MO',
        }),
        t.call,
      );
      assert.equal(master.timezone, timezone, 'the calendar zone is the default');
      const list = await cal.occurrences(t.call, {
        from: '2026-02-01T00:00:00Z',
        to: '2026-12-01T00:00:00Z',
        calendar_id: c.id,
      });
      assert.equal(list.length, 44, 'every Monday from Feb 2 to Nov 30');
      assert.ok(
        list.every((e) => local(e.start_at!, timezone).endsWith('09:00')),
        `all at 09:00 local in ${timezone}`,
      );
      assert.deepEqual(
        [...new Set(list.map((e) => e.start_at!.getUTCHours()))].sort(),
        [...hours].sort(),
        'the UTC hour moves by one',
      );
      assert.ok(
        list.every(
          (e) =>
            e.id === master.id && e.series_id === master.id && e.recurrence_id!.getTime() === e.start_at!.getTime(),
        ),
      );
    }
  });

  it('skips a daily 02:30 on the spring-forward day without counting it, and takes the earlier offset for 01:30 on the fall-back day', async () => {
    const t = tenant();
    const c = await calendarOf(t);
    const gap = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Gap',
        start_at: d('2026-03-06T07:30:00Z'),
        end_at: d('2026-03-06T08:00:00Z'),
        rrule: 'FREQ=DAILY;COUNT=5',
      }),
      t.call,
    );
    const list = await cal.occurrences(t.call, {
      from: '2026-03-01T00:00:00Z',
      to: '2026-03-20T00:00:00Z',
      calendar_id: c.id,
    });
    assert.deepEqual(
      list.filter((e) => e.id === gap.id).map((e) => local(e.start_at!, 'America/New_York')),
      ['2026-03-06 02:30', '2026-03-07 02:30', '2026-03-09 02:30', '2026-03-10 02:30', '2026-03-11 02:30'],
    );
    const fold = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Fold',
        start_at: d('2026-10-30T05:30:00Z'),
        end_at: d('2026-10-30T06:00:00Z'),
        rrule: 'FREQ=DAILY;COUNT=4',
      }),
      t.call,
    );
    const later = await cal.occurrences(t.call, {
      from: '2026-10-29T00:00:00Z',
      to: '2026-11-05T00:00:00Z',
      calendar_id: c.id,
    });
    assert.deepEqual(
      later.filter((e) => e.id === fold.id).map((e) => e.start_at!.toISOString()),
      ['2026-10-30T05:30:00.000Z', '2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z'],
      '01:30 EDT (the earlier offset) on Nov 1',
    );
  });

  it('lists all-day events by date (end exclusive) and all-day series occurrences with their dates', async () => {
    const t = tenant();
    const c = await calendarOf(t);
    const single = await cal.client.call(
      S.createEvent,
      ev({ calendar_id: c.id, title: 'Holiday', is_all_day: true, start_date: '2026-07-03', end_date: '2026-07-04' }),
      t.call,
    );
    assert.deepEqual(
      [single.is_all_day, single.start_date, single.end_date, single.start_at],
      [true, '2026-07-03', '2026-07-04', undefined],
    );
    const series = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Trip',
        start_date: '2026-07-01',
        end_date: '2026-07-03',
        rrule: 'FREQ=WEEKLY;COUNT=3',
      }),
      t.call,
    );
    assert.equal(series.is_all_day, true, 'dates without is_all_day make an all-day event');
    const list = await cal.occurrences(t.call, {
      from: '2026-07-01T00:00:00Z',
      to: '2026-07-31T00:00:00Z',
      calendar_id: c.id,
    });
    assert.deepEqual(
      list.map((e) => `${e.title} ${e.start_date}..${e.end_date}`),
      [
        'Trip 2026-07-01..2026-07-03',
        'Holiday 2026-07-03..2026-07-04',
        'Trip 2026-07-08..2026-07-10',
        'Trip 2026-07-15..2026-07-17',
      ],
    );
    // A window ending at 00:00 New York on July 3 (04:00Z) ends before the holiday begins there.
    const before = await cal.occurrences(t.call, {
      from: '2026-07-02T00:00:00Z',
      to: '2026-07-03T04:00:00Z',
      calendar_id: c.id,
    });
    assert.deepEqual(
      before.map((e) => e.title),
      ['Trip'],
    );
  });

  it('pages through a window of many series (ties included) without dropping or repeating an occurrence', async () => {
    const t = tenant();
    const c = await calendarOf(t, 'UTC');
    const start = d('2026-05-04T09:00:00Z');
    for (let i = 0; i < 24; i++) {
      // Twelve series share one start (ties broken by id); the others are spread over the day.
      const at = new Date(start.getTime() + (i < 12 ? 0 : i * 600_000));
      await cal.client.call(
        S.createEvent,
        ev({
          calendar_id: c.id,
          title: `S${i}`,
          start_at: at,
          end_at: new Date(at.getTime() + 1_800_000),
          rrule: i % 3 === 0 ? 'FREQ=DAILY;COUNT=4' : 'FREQ=DAILY',
        }),
        t.call,
      );
    }
    for (let i = 0; i < 5; i++)
      await cal.client.call(
        S.createEvent,
        ev({
          calendar_id: c.id,
          title: `One${i}`,
          start_at: d(`2026-05-0${5 + (i % 2)}T09:00:00Z`),
          end_at: d(`2026-05-0${5 + (i % 2)}T10:00:00Z`),
        }),
        t.call,
      );
    // An exception that moves an occurrence to another day.
    const first = (
      await cal.occurrences(t.call, { from: '2026-05-05T00:00:00Z', to: '2026-05-06T00:00:00Z', calendar_id: c.id })
    )[0]!;
    await cal.client.call(
      S.updateEvent,
      upd({
        id: first.id,
        update_scope: THIS,
        recurrence_id: first.recurrence_id,
        start_at: d('2026-05-07T12:00:00Z'),
        end_at: d('2026-05-07T13:00:00Z'),
      }),
      t.call,
    );

    const window = { from: '2026-05-04T00:00:00Z', to: '2026-05-09T00:00:00Z', calendar_id: c.id };
    const whole = await cal.occurrences(t.call, window, 200);
    const key = (e: CalendarEvent) => `${e.id}/${e.recurrence_id?.toISOString() ?? ''}`;
    assert.equal(new Set(whole.map(key)).size, whole.length, 'no occurrence twice');
    assert.equal(whole.length, 8 * 4 + 16 * 5 + 5, 'COUNT=4 series: 4 each, open series: 5 days each, 5 single events');
    for (const size of [1, 7, 50]) {
      const paged = await cal.occurrences(t.call, window, size);
      assert.deepEqual(paged.map(key), whole.map(key), `pages of ${size} give the same occurrences in the same order`);
    }
    const starts = whole.map((e) => e.start_at!.getTime());
    assert.deepEqual(
      starts,
      [...starts].sort((a, b) => a - b),
      'ascending start order',
    );
    assert.equal(
      (
        await badFields(
          cal.client.call(S.listEvents, { from: d(window.from), to: d(window.to), cursor: 'bm90LWEtY3Vyc29y' }, t.call),
        )
      )[0],
      'cursor',
    );
  });

  it('lists windows across the end of the occurrence index (400 days ahead) by expanding the rest on read', async () => {
    const t = tenant();
    const c = await calendarOf(t, 'UTC');
    // NOW is 2026-06-01: the index ends 2027-07-06; this window straddles it.
    for (let i = 0; i < 3; i++) {
      await cal.client.call(
        S.createEvent,
        ev({
          calendar_id: c.id,
          title: `D${i}`,
          start_at: d(`2026-06-0${i + 1}T09:00:00Z`),
          end_at: d(`2026-06-0${i + 1}T10:00:00Z`),
          rrule: 'FREQ=DAILY',
        }),
        t.call,
      );
    }
    const { rows } = await cal.db.query(`SELECT indexed_until FROM events WHERE tenant_id = $1`, [t.id]);
    assert.deepEqual(
      rows.map((r) => r.indexed_until.toISOString()),
      Array(3).fill('2027-07-06T00:00:00.000Z'),
    );
    const window = { from: '2027-06-26T00:00:00Z', to: '2027-07-16T00:00:00Z', calendar_id: c.id };
    const whole = await cal.occurrences(t.call, window, 200);
    assert.equal(whole.length, 60, '3 daily series over 20 days, indexed or not');
    const days = whole.map((e) => e.start_at!.toISOString().slice(0, 10));
    assert.deepEqual([...new Set(days)].length, 20, 'every day of the window, before and after the index end');
    assert.ok(
      days.every((day, i) => i === 0 || day >= days[i - 1]!),
      'in start order',
    );
    const key = (e: CalendarEvent) => `${e.id}/${e.recurrence_id!.toISOString()}`;
    assert.equal(new Set(whole.map(key)).size, 60);
    assert.deepEqual(
      (await cal.occurrences(t.call, window, 4)).map(key),
      whole.map(key),
      'pages of 4 across the index end',
    );
    // An exception beyond the index replaces its occurrence there too.
    const far = whole[45]!;
    await cal.client.call(
      S.updateEvent,
      upd({ id: far.id, update_scope: THIS, recurrence_id: far.recurrence_id, title: 'Far' }),
      t.call,
    );
    const after = await cal.occurrences(t.call, window, 7);
    assert.equal(after.length, 60);
    assert.deepEqual(
      after.filter((e) => e.title === 'Far').map((e) => e.recurrence_id!.toISOString()),
      [far.recurrence_id!.toISOString()],
    );
  });

  it('indexes a dense (hourly) series from now up to the cap, and lists its past on read', async () => {
    const t = tenant();
    const c = await calendarOf(t, 'UTC');
    const h = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Hourly',
        start_at: d('2026-01-01T00:00:00Z'),
        end_at: d('2026-01-01T00:10:00Z'),
        rrule: 'FREQ=HOURLY',
      }),
      t.call,
    );
    const { rows } = await cal.db.query(
      `SELECT indexed_from, indexed_until, index_capped, (SELECT count(*)::int FROM occurrences WHERE event_id = $1) AS n FROM events WHERE id = $1`,
      [h.id],
    );
    assert.deepEqual(
      [rows[0].indexed_from.toISOString(), rows[0].indexed_until.toISOString(), rows[0].index_capped, rows[0].n],
      [NOW.toISOString(), '2026-08-23T08:00:00.000Z', true, 2000],
    );
    const past = await cal.occurrences(
      t.call,
      { from: '2026-05-30T00:00:00Z', to: '2026-06-02T00:00:00Z', calendar_id: c.id },
      50,
    );
    assert.equal(past.length, 72, 'two days on read, one from the index, every hour once');
    assert.equal(new Set(past.map((e) => e.start_at!.getTime())).size, 72);
  });

  it('moves the occurrence index forward as time passes (the extender worker)', async () => {
    let clock = NOW;
    const moving = await startCalendar({ now: () => clock, indexRefreshMs: 50 });
    try {
      const t = tenant();
      const c = await moving.client.call(S.createCalendar, { name: 'Moving', timezone: 'UTC' }, t.call);
      const s = await moving.client.call(
        S.createEvent,
        ev({
          calendar_id: c.id,
          title: 'W',
          start_at: d('2026-06-01T09:00:00Z'),
          end_at: d('2026-06-01T10:00:00Z'),
          rrule: 'FREQ=WEEKLY',
        }),
        t.call,
      );
      const until = async () =>
        (
          await moving.db.query(`SELECT indexed_until FROM events WHERE id = $1`, [s.id])
        ).rows[0].indexed_until.toISOString();
      assert.equal(await until(), '2027-07-06T00:00:00.000Z');
      clock = new Date('2026-09-01T00:00:00Z'); // 92 days later: less than 370 days of index left
      await eventually(
        'the extender moved the index',
        async () => (await until()) !== '2027-07-06T00:00:00.000Z',
        30_000,
      );
      assert.equal(await until(), '2027-10-06T00:00:00.000Z', '400 days after the new now');
      const { rows } = await moving.db.query(
        `SELECT count(*)::int AS n, max(sort_start) AS last FROM occurrences WHERE event_id = $1`,
        [s.id],
      );
      assert.equal(rows[0].last.toISOString(), '2027-10-04T09:00:00.000Z');
      assert.equal(
        rows[0].n,
        71,
        'a year back from the new now is the series start: all weeks from 2026-06-01 to 2027-10-04',
      );
    } finally {
      await moving.stop();
    }
  });

  it('applies this, all and this_and_following (with COUNT) without losing or duplicating an occurrence, and bumps sequences', async () => {
    const t = tenant();
    const c = await calendarOf(t);
    const master = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Standup',
        start_at: d('2026-06-01T13:00:00Z'),
        end_at: d('2026-06-01T13:15:00Z'),
        rrule: 'FREQ=WEEKLY;COUNT=10',
        reminders: [{ method: ReminderMethod.REMINDER_METHOD_POPUP, minutes: 10 }],
      }),
      t.call,
    );
    assert.equal(master.sequence, 0);
    assert.equal(master.next_occurrence?.toISOString(), '2026-06-01T13:00:00.000Z', 'the first start after now');
    const window = { from: '2026-05-01T00:00:00Z', to: '2026-09-01T00:00:00Z', calendar_id: c.id };
    const before = await cal.occurrences(t.call, window);
    assert.equal(before.length, 10);

    // this: the 3rd occurrence moves an hour later and gets its own title.
    const third = before[2]!;
    const ex = await cal.client.call(
      S.updateEvent,
      upd({
        id: master.id,
        update_scope: THIS,
        recurrence_id: third.recurrence_id,
        title: 'Moved',
        start_at: d('2026-06-15T14:00:00Z'),
        end_at: d('2026-06-15T14:15:00Z'),
      }),
      t.call,
    );
    assert.deepEqual(
      [ex.series_id, ex.recurrence_id?.toISOString(), ex.sequence, ex.ical_uid, ex.rrule],
      [master.id, third.recurrence_id!.toISOString(), 1, master.ical_uid, undefined],
    );
    assert.equal(
      (await cal.client.call(S.getEvent, { id: master.id }, t.call)).sequence,
      0,
      'the master does not change',
    );
    // The 8th occurrence gets an exception too (it moves with the split below).
    const eighth = before[7]!;
    const ex8 = await cal.client.call(
      S.updateEvent,
      upd({ id: master.id, update_scope: THIS, recurrence_id: eighth.recurrence_id, location: 'Room 8' }),
      t.call,
    );
    let list = await cal.occurrences(t.call, window);
    assert.deepEqual(rids(list).sort(), rids(before).sort(), 'same occurrences, by original start');
    assert.deepEqual(
      [list[2]!.id, list[2]!.title, list[2]!.start_at?.toISOString()],
      [ex.id, 'Moved', '2026-06-15T14:00:00.000Z'],
    );

    // all: the title changes on the master and on its exceptions; the exceptions keep their own times.
    const all = await cal.client.call(
      S.updateEvent,
      upd({ id: master.id, update_scope: ALL, description: 'Daily sync' }),
      t.call,
    );
    assert.equal(all.sequence, 1);
    const exAfter = await cal.client.call(S.getEvent, { id: ex.id }, t.call);
    assert.deepEqual(
      [exAfter.description, exAfter.title, exAfter.start_at?.toISOString(), exAfter.sequence],
      ['Daily sync', 'Moved', '2026-06-15T14:00:00.000Z', 2],
    );

    // this_and_following at the 6th occurrence: the old master ends before it, a new one takes the rest (COUNT 10 - 5 = 5).
    const sixth = before[5]!;
    const following = await cal.client.call(
      S.updateEvent,
      upd({ id: master.id, update_scope: FOLLOWING, recurrence_id: sixth.recurrence_id, title: 'Standup v2' }),
      t.call,
    );
    assert.equal(following.rrule, 'FREQ=WEEKLY;COUNT=5');
    assert.equal(following.start_at?.toISOString(), sixth.start_at!.toISOString());
    assert.equal(following.sequence, 2, "the new master starts at the old one's + 1");
    assert.notEqual(following.ical_uid, master.ical_uid);
    const old = await cal.client.call(S.getEvent, { id: master.id }, t.call);
    assert.equal(old.rrule, 'FREQ=WEEKLY;UNTIL=20260706T125959Z');
    assert.equal(old.sequence, 2);
    const moved8 = await cal.client.call(S.getEvent, { id: ex8.id }, t.call);
    assert.deepEqual(
      [moved8.series_id, moved8.title, moved8.location, moved8.sequence, moved8.ical_uid],
      [following.id, 'Standup v2', 'Room 8', 3, following.ical_uid],
    );

    list = await cal.occurrences(t.call, window);
    assert.deepEqual(rids(list).sort(), rids(before).sort(), 'no occurrence lost or duplicated at the split');
    assert.deepEqual(
      list.map((e) => e.title),
      [
        'Standup',
        'Standup',
        'Moved',
        'Standup',
        'Standup',
        'Standup v2',
        'Standup v2',
        'Standup v2',
        'Standup v2',
        'Standup v2',
      ],
    );

    // At the first occurrence this_and_following is all.
    const whole = await cal.client.call(
      S.updateEvent,
      upd({ id: following.id, update_scope: FOLLOWING, recurrence_id: sixth.recurrence_id, title: 'Standup v3' }),
      t.call,
    );
    assert.deepEqual([whole.id, whole.title, whole.sequence], [following.id, 'Standup v3', 3]);

    const { rows } = await cal.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq`, [t.id]);
    assert.ok(
      rows.some((r) => r.event_type === 'calendar_event.created') &&
        rows.some((r) => r.event_type === 'calendar_event.updated'),
    );
  });

  it('moves a whole series (all): exceptions whose occurrence is gone are deleted, so no day has two meetings; a cleared rule makes a single event', async () => {
    const t = tenant();
    const c = await calendarOf(t, 'UTC');
    const m = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Daily',
        start_at: d('2026-07-06T09:00:00Z'),
        end_at: d('2026-07-06T09:30:00Z'),
        rrule: 'FREQ=DAILY;COUNT=5',
      }),
      t.call,
    );
    const window = { from: '2026-07-01T00:00:00Z', to: '2026-08-01T00:00:00Z', calendar_id: c.id };
    const ex = await cal.client.call(
      S.updateEvent,
      upd({ id: m.id, update_scope: THIS, recurrence_id: d('2026-07-08T09:00:00Z'), title: 'Kept time' }),
      t.call,
    );
    await cal.client.call(
      S.updateEvent,
      upd({ id: m.id, update_scope: ALL, start_at: d('2026-07-06T10:00:00Z'), end_at: d('2026-07-06T10:30:00Z') }),
      t.call,
    );
    assert.equal(
      (await failure(cal.client.call(S.getEvent, { id: ex.id }, t.call))).code,
      grpc.status.NOT_FOUND,
      'its 09:00 occurrence no longer exists',
    );
    const moved = await cal.occurrences(t.call, window);
    assert.deepEqual(
      moved.map((e) => e.start_at!.toISOString().slice(5, 16)),
      ['07-06T10:00', '07-07T10:00', '07-08T10:00', '07-09T10:00', '07-10T10:00'],
    );
    const single = await cal.client.call(S.updateEvent, upd({ id: m.id, rrule: '', update_mask: ['rrule'] }), t.call);
    assert.deepEqual([single.rrule, single.exdates, single.next_occurrence], [undefined, [], undefined]);
    assert.deepEqual(
      (await cal.occurrences(t.call, window)).map((e) => [e.id, e.series_id, e.recurrence_id]),
      [[m.id, undefined, undefined]],
    );
  });

  it('re-indexes one occurrence on `this` changes exactly as a whole re-index would', async () => {
    const t = tenant();
    const c = await calendarOf(t);
    const m = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Daily',
        start_at: d('2026-06-01T13:00:00Z'),
        end_at: d('2026-06-01T13:30:00Z'),
        rrule: 'FREQ=DAILY',
      }),
      t.call,
    );
    const rid = (day: number) => d(`2026-06-${String(day).padStart(2, '0')}T13:00:00Z`);
    const ex = await cal.client.call(
      S.updateEvent,
      upd({
        id: m.id,
        update_scope: THIS,
        recurrence_id: rid(3),
        start_at: d('2026-06-03T15:00:00Z'),
        end_at: d('2026-06-03T16:00:00Z'),
      }),
      t.call,
    );
    await cal.client.call(
      S.updateEvent,
      upd({ id: ex.id, title: 'Again', start_at: d('2026-06-04T15:00:00Z'), end_at: d('2026-06-04T16:00:00Z') }),
      t.call,
    );
    await cal.client.call(
      S.updateEvent,
      upd({ id: m.id, update_scope: THIS, recurrence_id: rid(5), title: 'Five' }),
      t.call,
    );
    await cal.client.call(S.deleteEvent, { id: m.id, update_scope: THIS, recurrence_id: rid(6) }, t.call);
    await cal.client.call(S.deleteEvent, { id: m.id, update_scope: THIS, recurrence_id: rid(5) }, t.call);
    const snapshot = async () =>
      (
        await cal.db.query(
          `SELECT event_id, rid_key, sort_start, sort_end, start_at, end_at FROM occurrences WHERE tenant_id = $1 ORDER BY sort_start, event_id, rid_key`,
          [t.id],
        )
      ).rows.map((r) => JSON.stringify(r));
    const incremental = await snapshot();
    const client = await cal.db.connect();
    try {
      await client.query('BEGIN');
      await reindex(client, t.id, [m.id], NOW);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    assert.deepEqual(incremental, await snapshot());
    assert.equal(
      incremental.length,
      400 - 2,
      'the 400 occurrences to 400 days ahead less two exdates (the moved one is its exception row)',
    );
  });

  it('deletes this, this_and_following and all, and an exception by its own id', async () => {
    const t = tenant();
    const c = await calendarOf(t);
    const master = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Daily',
        start_at: d('2026-08-03T13:00:00Z'),
        end_at: d('2026-08-03T13:30:00Z'),
        rrule: 'FREQ=DAILY;COUNT=8',
      }),
      t.call,
    );
    const window = { from: '2026-08-01T00:00:00Z', to: '2026-08-31T00:00:00Z', calendar_id: c.id };
    const before = await cal.occurrences(t.call, window);
    const ex = await cal.client.call(
      S.updateEvent,
      upd({ id: master.id, update_scope: THIS, recurrence_id: before[1]!.recurrence_id, title: 'Changed' }),
      t.call,
    );

    await cal.client.call(
      S.deleteEvent,
      { id: master.id, update_scope: THIS, recurrence_id: before[2]!.recurrence_id },
      t.call,
    );
    await cal.client.call(S.deleteEvent, { id: ex.id, update_scope: 0 }, t.call); // an exception's own id: `this`
    assert.equal((await failure(cal.client.call(S.getEvent, { id: ex.id }, t.call))).code, grpc.status.NOT_FOUND);
    const m = await cal.client.call(S.getEvent, { id: master.id }, t.call);
    assert.deepEqual(
      m.exdates.map((x) => x.toISOString()).sort(),
      [before[1]!.recurrence_id!.toISOString(), before[2]!.recurrence_id!.toISOString()].sort(),
    );
    assert.equal(m.sequence, 2);
    assert.deepEqual(
      rids(await cal.occurrences(t.call, window)),
      rids(before).filter((_, i) => i !== 1 && i !== 2),
    );

    await cal.client.call(
      S.deleteEvent,
      { id: master.id, update_scope: FOLLOWING, recurrence_id: before[5]!.recurrence_id },
      t.call,
    );
    assert.deepEqual(
      rids(await cal.occurrences(t.call, window)),
      [0, 3, 4].map((i) => before[i]!.recurrence_id!.toISOString()),
    );

    assert.deepEqual(
      await badFields(
        cal.client.call(
          S.deleteEvent,
          { id: master.id, update_scope: THIS, recurrence_id: before[2]!.recurrence_id },
          t.call,
        ),
      ),
      ['recurrence_id'],
      'an excluded start is no occurrence',
    );
    await cal.client.call(S.deleteEvent, { id: master.id, update_scope: 0 }, t.call);
    assert.equal((await failure(cal.client.call(S.getEvent, { id: master.id }, t.call))).code, grpc.status.NOT_FOUND);
    assert.deepEqual(await cal.occurrences(t.call, window), []);
  });

  it('ends 10 parallel this_and_following edits of one series in one consistent series', async () => {
    const t = tenant();
    const c = await calendarOf(t);
    const master = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'P',
        start_at: d('2026-09-01T13:00:00Z'),
        end_at: d('2026-09-01T14:00:00Z'),
        rrule: 'FREQ=DAILY;COUNT=20',
      }),
      t.call,
    );
    const window = { from: '2026-09-01T00:00:00Z', to: '2026-10-01T00:00:00Z', calendar_id: c.id };
    const before = await cal.occurrences(t.call, window);
    const results = await Promise.allSettled(
      before
        .slice(5, 15)
        .map((o, i) =>
          cal.client.call(
            S.updateEvent,
            upd({ id: master.id, update_scope: FOLLOWING, recurrence_id: o.recurrence_id, title: `P${i}` }),
            t.call,
          ),
        ),
    );
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    assert.ok(ok >= 1, 'at least one split');
    for (const r of results)
      if (r.status === 'rejected')
        assert.ok(
          [grpc.status.INVALID_ARGUMENT, grpc.status.ABORTED].includes((r.reason as { code: number }).code),
          String(r.reason),
        );
    const list = await cal.occurrences(t.call, window);
    assert.deepEqual(rids(list), rids(before), 'the same 20 occurrences, once each, in order');
    assert.equal(new Set(list.map((e) => e.id)).size, ok + 1, 'one master per successful split');
  });

  it('refuses bad input with a 400 naming the field', async () => {
    const t = tenant();
    const c = await calendarOf(t);
    const base = {
      calendar_id: c.id,
      title: 'X',
      start_at: d('2026-06-01T13:00:00Z'),
      end_at: d('2026-06-01T14:00:00Z'),
    };
    const create = (extra: Record<string, unknown>) =>
      badFields(cal.client.call(S.createEvent, ev({ ...base, ...extra }), t.call));
    assert.deepEqual(await create({ rrule: 'FREQ=SOMETIMES' }), ['rrule']);
    assert.deepEqual(
      await create({ rrule: 'FREQ=WEEKLY;BYDAY=TU' }),
      ['rrule'],
      'the start must be the first occurrence',
    );
    assert.deepEqual(await create({ timezone: 'Mars/Olympus' }), ['timezone']);
    assert.deepEqual(await create({ end_at: d('2026-06-01T12:00:00Z') }), ['end_at']);
    assert.deepEqual(
      await create({
        start_at: undefined,
        end_at: undefined,
        is_all_day: true,
        start_date: '2026-06-02',
        end_date: '2026-06-02',
      }),
      ['end_date'],
    );
    assert.deepEqual(
      await create({
        start_at: undefined,
        end_at: undefined,
        is_all_day: true,
        start_date: '2026-02-30',
        end_date: '2026-03-02',
      }),
      ['start_date'],
    );
    assert.deepEqual(await create({ exdates: [d('2026-06-08T13:00:00Z')] }), ['exdates']);
    assert.deepEqual(await create({ reminders: [{ method: ReminderMethod.REMINDER_METHOD_EMAIL, minutes: 50_000 }] }), [
      'reminders[0].minutes',
    ]);
    assert.deepEqual(await create({ title: '' }), ['title']);
    assert.deepEqual(await create({ location_lat: 91 }), ['location_lat']);
    assert.deepEqual(await create({ conference_url: 'ftp://x' }), ['conference_url']);
    // Times outside the years 1900-2999, naming the field.
    assert.deepEqual(await create({ start_at: d('1899-12-31T23:59:59Z') }), ['start_at']);
    assert.deepEqual(await create({ end_at: d('3000-01-01T00:00:00Z') }), ['end_at']);
    assert.deepEqual(
      await create({
        start_at: undefined,
        end_at: undefined,
        is_all_day: true,
        start_date: '0001-01-01',
        end_date: '10000-01-01',
      }),
      ['start_date', 'end_date'],
    );
    assert.deepEqual(await create({ rrule: 'FREQ=DAILY', exdates: [d('0001-06-02T13:00:00Z')] }), ['exdates[0]']);
    assert.deepEqual(await create({ rrule: 'FREQ=DAILY;UNTIL=30000101T000000Z' }), ['rrule']);
    for (const conference_url of [
      'https://meet.example/x\r\nX-Injected: 1',
      'https://meet.example/a b',
      ' https://meet.example/',
    ])
      assert.deepEqual(await create({ conference_url }), ['conference_url'], JSON.stringify(conference_url));
    assert.deepEqual(await badFields(cal.client.call(S.createCalendar, { name: 'C', timezone: '+05:00' }, t.call)), [
      'timezone',
    ]);
    assert.deepEqual(await badFields(cal.client.call(S.createCalendar, { name: ' ' }, t.call)), ['name']);
    assert.deepEqual(
      await badFields(
        cal.client.call(S.listEvents, { from: d('2026-01-01T00:00:00Z'), to: d('2027-01-03T00:00:00Z') }, t.call),
      ),
      ['to'],
      'a window over 366 days',
    );
    assert.deepEqual(await badFields(cal.client.call(S.listEvents, { to: d('2026-01-03T00:00:00Z') }, t.call)), [
      'from',
    ]);
    assert.deepEqual(
      await badFields(
        cal.client.call(S.listEvents, { from: d('2026-01-03T00:00:00Z'), to: d('2026-01-01T00:00:00Z') }, t.call),
      ),
      ['to'],
    );

    const series = await cal.client.call(S.createEvent, ev({ ...base, rrule: 'FREQ=DAILY' }), t.call);
    const put = (extra: Record<string, unknown>) =>
      badFields(cal.client.call(S.updateEvent, upd({ id: series.id, ...extra }), t.call));
    assert.deepEqual(await put({ update_scope: THIS, title: 'Y' }), ['recurrence_id'], 'this needs recurrence_id');
    assert.deepEqual(
      await put({ update_scope: THIS, title: 'Y', recurrence_id: d('2026-06-02T13:30:00Z') }),
      ['recurrence_id'],
      'not an occurrence',
    );
    assert.deepEqual(
      await put({ update_scope: THIS, rrule: 'FREQ=WEEKLY', recurrence_id: d('2026-06-02T13:00:00Z') }),
      ['rrule'],
    );
    assert.deepEqual(await put({ rrule: 'FREQ=DAILY;COUNT=5000' }), ['rrule']);
    assert.deepEqual(await put({ update_scope: THIS, title: 'Y', recurrence_id: d('1800-06-02T13:00:00Z') }), [
      'recurrence_id',
    ]);
    assert.deepEqual(
      await badFields(
        cal.client.call(
          S.deleteEvent,
          { id: series.id, update_scope: THIS, recurrence_id: d('3000-06-02T13:00:00Z') },
          t.call,
        ),
      ),
      ['recurrence_id'],
    );
    const single = await cal.client.call(S.createEvent, ev(base), t.call);
    assert.deepEqual(
      await badFields(
        cal.client.call(
          S.updateEvent,
          upd({ id: single.id, title: 'Y', recurrence_id: d('2026-06-01T13:00:00Z') }),
          t.call,
        ),
      ),
      ['recurrence_id'],
    );
    const stored = await cal.client.call(S.getEvent, { id: series.id }, t.call);
    assert.deepEqual(
      [stored.title, stored.sequence, stored.rrule],
      ['X', 0, 'FREQ=DAILY'],
      'nothing written by refused requests',
    );
  });

  it('refuses rules more frequent than hourly, and lists a tenant’s calendar although a stored series cannot be expanded', async () => {
    const t = tenant();
    const c = await calendarOf(t, 'UTC');
    const base = {
      calendar_id: c.id,
      title: 'X',
      start_at: d('2026-06-03T09:00:00Z'),
      end_at: d('2026-06-03T09:00:01Z'),
    };
    assert.deepEqual(await badFields(cal.client.call(S.createEvent, ev({ ...base, rrule: 'FREQ=MINUTELY' }), t.call)), [
      'rrule',
    ]);
    const hourly = await cal.client.call(S.createEvent, ev({ ...base, title: 'Hourly', rrule: 'FREQ=HOURLY' }), t.call);
    assert.deepEqual(
      await badFields(
        cal.client.call(S.updateEvent, upd({ id: hourly.id, rrule: 'FREQ=SECONDLY;INTERVAL=2' }), t.call),
      ),
      ['rrule'],
    );
    await cal.client.call(S.deleteEvent, { id: hourly.id, update_scope: ALL }, t.call);

    // A per-second series stored before the rule, written straight into the database (no index rows).
    const legacy = await cal.client.call(S.createEvent, ev({ ...base, title: 'Every second' }), t.call);
    await cal.db.query(
      `UPDATE events SET rrule = 'FREQ=SECONDLY', span_end = NULL, indexed_from = NULL, indexed_until = NULL WHERE id = $1`,
      [legacy.id],
    );
    await cal.db.query('DELETE FROM occurrences WHERE event_id = $1', [legacy.id]);
    const other = await cal.client.call(
      S.createEvent,
      ev({ ...base, title: 'Standup', start_at: d('2026-06-03T10:00:00Z'), end_at: d('2026-06-03T10:15:00Z') }),
      t.call,
    );

    // Four hours of it are more occurrences than one expansion takes: the series is left out, the rest listed.
    const list = await cal.occurrences(t.call, { from: '2026-06-03T09:00:00Z', to: '2026-06-03T13:00:00Z' });
    assert.deepEqual(
      list.map((e) => e.title),
      ['Standup'],
    );
    assert.equal(list[0]!.id, other.id);
    // A minute of it is listed.
    const minute = await cal.occurrences(t.call, { from: '2026-06-03T09:00:00Z', to: '2026-06-03T09:01:00Z' });
    assert.equal(minute.filter((e) => e.id === legacy.id).length, 60);
    // It stays readable, so that it can be fixed.
    assert.equal((await cal.client.call(S.getEvent, { id: legacy.id }, t.call)).rrule, 'FREQ=SECONDLY');
    const fixed = await cal.client.call(S.updateEvent, upd({ id: legacy.id, rrule: 'FREQ=DAILY;COUNT=2' }), t.call);
    assert.equal(fixed.rrule, 'FREQ=DAILY;COUNT=2');
  });

  it('keeps tenants apart: another tenant’s calendar or event is a 404', async () => {
    const a = tenant();
    const b = tenant();
    const c = await calendarOf(a);
    const made = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Private',
        start_at: d('2026-06-01T13:00:00Z'),
        end_at: d('2026-06-01T14:00:00Z'),
      }),
      a.call,
    );
    const notFound = async (p: Promise<unknown>) => assert.equal((await failure(p)).code, grpc.status.NOT_FOUND);
    await notFound(
      cal.client.call(
        S.createEvent,
        ev({
          calendar_id: c.id,
          title: 'Sneaky',
          start_at: d('2026-06-01T13:00:00Z'),
          end_at: d('2026-06-01T14:00:00Z'),
        }),
        b.call,
      ),
    );
    await notFound(cal.client.call(S.getEvent, { id: made.id }, b.call));
    await notFound(cal.client.call(S.updateEvent, upd({ id: made.id, title: 'Hacked' }), b.call));
    await notFound(cal.client.call(S.deleteEvent, { id: made.id, update_scope: 0 }, b.call));
    await notFound(cal.client.call(S.getCalendar, { id: c.id }, b.call));
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- the deprecated rpc, still served (docs/api.md §14)
    await notFound(cal.client.call(S.getCalendarFeed, { id: c.id }, b.call));
    await notFound(
      (async () => {
        for await (const _ of cal.client.stream(S.streamCalendarFeed, { id: c.id }, b.call));
      })(),
    );
    // The owner's feed: streamed, and the same text through the deprecated one-message rpc.
    let streamed = '';
    for await (const chunk of cal.client.stream(S.streamCalendarFeed, { id: c.id }, a.call)) {
      assert.equal(chunk.content_type, 'text/calendar; charset=utf-8');
      streamed += Buffer.from(chunk.data).toString();
    }
    assert.match(streamed, /^BEGIN:VCALENDAR\r\n[\s\S]*SUMMARY:Private\r\n[\s\S]*END:VCALENDAR\r\n$/);
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- the deprecated rpc, still served (docs/api.md §14)
    const whole = await cal.client.call(S.getCalendarFeed, { id: c.id }, a.call);
    assert.equal(
      Buffer.from(whole.data)
        .toString()
        .replace(/DTSTAMP:.*\r\n/g, ''),
      streamed.replace(/DTSTAMP:.*\r\n/g, ''),
    );
    await notFound(
      cal.client.call(
        S.listEvents,
        { from: d('2026-06-01T00:00:00Z'), to: d('2026-06-02T00:00:00Z'), calendar_id: c.id },
        b.call,
      ),
    );
    assert.deepEqual(await cal.occurrences(b.call, { from: '2026-06-01T00:00:00Z', to: '2026-06-02T00:00:00Z' }), []);
    assert.equal((await cal.client.call(S.listCalendars, {}, b.call)).data.length, 0);
  });

  it('creates, lists, patches and deletes calendars; a deleted calendar takes its events', async () => {
    const t = tenant();
    const c = await cal.client.call(S.createCalendar, { name: ' Team ', color: '#00f', metadata: { a: 1 } }, t.call);
    assert.deepEqual([c.name, c.timezone, c.color, c.description], ['Team', 'UTC', '#00f', undefined]);
    const c2 = await cal.client.call(S.createCalendar, { name: 'Other', timezone: 'europe/berlin' }, t.call);
    assert.equal(c2.timezone, 'Europe/Berlin', 'the database spelling');
    const page = await cal.client.call(S.listCalendars, { limit: 1 }, t.call);
    assert.deepEqual([page.data[0]!.id, page.has_more], [c2.id, true]);
    const patched = await cal.client.call(
      S.updateCalendar,
      { id: c.id, description: 'Our team', timezone: 'Asia/Tokyo', update_mask: ['description', 'timezone'] },
      t.call,
    );
    assert.deepEqual([patched.description, patched.timezone, patched.name], ['Our team', 'Asia/Tokyo', 'Team']);
    const made = await cal.client.call(
      S.createEvent,
      ev({ calendar_id: c.id, title: 'E', start_at: d('2026-06-01T13:00:00Z'), end_at: d('2026-06-01T14:00:00Z') }),
      t.call,
    );
    assert.equal(made.timezone, 'Asia/Tokyo');
    await cal.client.call(S.deleteCalendar, { id: c.id }, t.call);
    assert.equal((await failure(cal.client.call(S.getCalendar, { id: c.id }, t.call))).code, grpc.status.NOT_FOUND);
    assert.equal((await failure(cal.client.call(S.getEvent, { id: made.id }, t.call))).code, grpc.status.NOT_FOUND);
    const { rows } = await cal.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq`, [t.id]);
    assert.deepEqual(
      rows.map((r) => r.event_type),
      [
        'calendar.created',
        'calendar.created',
        'calendar.updated',
        'calendar_event.created',
        'calendar.deleted',
        'calendar_event.deleted',
      ],
    );
  });

  it('computes next_occurrence from now, exceptions included, and null for single events and ended series', async () => {
    const t = tenant();
    const c = await calendarOf(t, 'UTC');
    const past = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'Past',
        start_at: d('2026-05-01T09:00:00Z'),
        end_at: d('2026-05-01T10:00:00Z'),
        rrule: 'FREQ=DAILY;COUNT=3',
      }),
      t.call,
    );
    assert.equal(past.next_occurrence, undefined, 'ended before now');
    const single = await cal.client.call(
      S.createEvent,
      ev({ calendar_id: c.id, title: 'One', start_at: d('2026-07-01T09:00:00Z'), end_at: d('2026-07-01T10:00:00Z') }),
      t.call,
    );
    assert.equal(single.next_occurrence, undefined);
    const s = await cal.client.call(
      S.createEvent,
      ev({
        calendar_id: c.id,
        title: 'S',
        start_at: d('2026-05-30T09:00:00Z'),
        end_at: d('2026-05-30T10:00:00Z'),
        rrule: 'FREQ=DAILY',
      }),
      t.call,
    );
    assert.equal(s.next_occurrence?.toISOString(), '2026-06-01T09:00:00.000Z');
    // The next occurrence moved earlier by an exception.
    await cal.client.call(
      S.updateEvent,
      upd({
        id: s.id,
        update_scope: THIS,
        recurrence_id: d('2026-06-01T09:00:00Z'),
        start_at: d('2026-06-01T07:00:00Z'),
        end_at: d('2026-06-01T08:00:00Z'),
      }),
      t.call,
    );
    assert.equal(
      (await cal.client.call(S.getEvent, { id: s.id }, t.call)).next_occurrence?.toISOString(),
      '2026-06-01T07:00:00.000Z',
    );
    const listed = await cal.occurrences(t.call, {
      from: '2026-06-02T00:00:00Z',
      to: '2026-06-03T00:00:00Z',
      calendar_id: c.id,
    });
    assert.equal(
      listed[0]!.next_occurrence?.toISOString(),
      '2026-06-01T07:00:00.000Z',
      'listed occurrences carry their master’s',
    );
  });
});
