import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkSeries,
  expandOccurrences,
  isOccurrence,
  MAX_OCCURRENCES,
  nextOccurrence,
  RecurrenceError,
  seriesEnd,
  splitSeries,
  type EventTimes,
  type Occurrence,
  type Series,
} from './domain/recurrence.js';
import { canonicalTimezone } from './domain/timezones.js';

const at = (iso: string) => new Date(iso);

function timed(start: string, end: string, timezone: string, rrule: string, exdates: string[] = []): Series {
  return {
    times: { is_all_day: false, start_at: at(start), end_at: at(end) },
    timezone,
    rrule,
    exdates: exdates.map(at),
  };
}

function allDay(start_date: string, end_date: string, timezone: string, rrule: string, exdates: string[] = []): Series {
  return { times: { is_all_day: true, start_date, end_date }, timezone, rrule, exdates: exdates.map(at) };
}

function starts(occurrences: Occurrence[]): string[] {
  return occurrences.map((o) => o.recurrence_id.toISOString());
}

/** The local wall time of an instant in a zone, HH:MM. */
function localTime(d: Date, timezone: string): string {
  return new Intl.DateTimeFormat('en-GB', {
    timeZone: timezone,
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).format(d);
}

function list(series: Series, from: string, to: string): Occurrence[] {
  return expandOccurrences(series, { from: at(from), to: at(to) });
}

/** Asserts `call` throws a RecurrenceError of this kind on this field, and returns it. */
function refused(call: () => unknown, field: string, kind: RecurrenceError['kind']): RecurrenceError {
  try {
    call();
  } catch (err) {
    assert.ok(err instanceof RecurrenceError, `expected a RecurrenceError, got ${String(err)}`);
    assert.deepEqual([err.field, err.kind], [field, kind], err.message);
    return err;
  }
  assert.fail(`expected a ${kind} error on ${field}`);
}

/**
 * Runs `call`, returning the CPU time it took in milliseconds (user + system: wall time on this
 * shared machine mostly measures the other processes).
 */
function cpuMs(call: () => void): number {
  const started = process.cpuUsage();
  call();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / 1000;
}

describe('time zones and DST', () => {
  it('keeps a weekly 09:00 at 09:00 in New York across both 2026 DST switches; the UTC instant moves by an hour', () => {
    const series = timed('2026-03-02T14:00:00Z', '2026-03-02T15:00:00Z', 'America/New_York', 'FREQ=WEEKLY');
    checkSeries(series);
    const occurrences = list(series, '2026-03-01T00:00:00Z', '2026-11-10T00:00:00Z');
    assert.equal(occurrences.length, 37); // 2 March to 9 November
    for (const o of occurrences) assert.equal(localTime(o.recurrence_id, 'America/New_York'), '09:00');
    const byDate = new Map(starts(occurrences).map((s) => [s.slice(0, 10), s]));
    // EST (UTC-5) before 8 March, EDT (UTC-4) until 1 November, EST again after.
    assert.equal(byDate.get('2026-03-02'), '2026-03-02T14:00:00.000Z');
    assert.equal(byDate.get('2026-03-09'), '2026-03-09T13:00:00.000Z');
    assert.equal(byDate.get('2026-10-26'), '2026-10-26T13:00:00.000Z');
    assert.equal(byDate.get('2026-11-02'), '2026-11-02T14:00:00.000Z');
    // A 1-hour event stays 1 hour long.
    for (const o of occurrences) if (!o.is_all_day) assert.equal(o.end_at.getTime() - o.start_at.getTime(), 3_600_000);
  });

  it('keeps a weekly 09:00 at 09:00 in Berlin across both 2026 DST switches', () => {
    const series = timed('2026-03-23T08:00:00Z', '2026-03-23T09:00:00Z', 'Europe/Berlin', 'FREQ=WEEKLY;BYDAY=MO');
    checkSeries(series);
    const occurrences = list(series, '2026-03-01T00:00:00Z', '2026-11-03T00:00:00Z');
    for (const o of occurrences) assert.equal(localTime(o.recurrence_id, 'Europe/Berlin'), '09:00');
    const ids = starts(occurrences);
    // CET (UTC+1) until 29 March, CEST (UTC+2) until 25 October.
    assert.deepEqual(ids.slice(0, 2), ['2026-03-23T08:00:00.000Z', '2026-03-30T07:00:00.000Z']);
    assert.ok(ids.includes('2026-10-19T07:00:00.000Z'));
    assert.ok(ids.includes('2026-10-26T08:00:00.000Z'));
  });

  it('skips a daily 02:30 on the New York spring-forward day without spending COUNT on it', () => {
    const series = timed('2026-03-07T07:30:00Z', '2026-03-07T08:00:00Z', 'America/New_York', 'FREQ=DAILY;COUNT=3');
    checkSeries(series);
    const occurrences = list(series, '2026-03-01T00:00:00Z', '2026-04-01T00:00:00Z');
    // 2026-03-08 02:30 does not exist in New York; COUNT=3 still yields three occurrences.
    assert.deepEqual(starts(occurrences), [
      '2026-03-07T07:30:00.000Z',
      '2026-03-09T06:30:00.000Z',
      '2026-03-10T06:30:00.000Z',
    ]);
  });

  it('takes the earlier offset for 01:30 on the fall-back day', () => {
    const series = timed('2026-10-31T05:30:00Z', '2026-10-31T06:00:00Z', 'America/New_York', 'FREQ=DAILY;COUNT=3');
    const ids = starts(list(series, '2026-10-30T00:00:00Z', '2026-11-05T00:00:00Z'));
    // 01:30 happens twice on 1 November: EDT (05:30Z) first, EST (06:30Z) an hour later.
    assert.deepEqual(ids, ['2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z']);
  });

  it('refuses unknown time zones and offsets, and spells known ones as the database does', () => {
    refused(
      () => checkSeries(timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'Mars/Olympus_Mons', 'FREQ=DAILY')),
      'timezone',
      'INVALID_TIMEZONE',
    );
    refused(() => canonicalTimezone('+05:00'), 'timezone', 'INVALID_TIMEZONE');
    refused(() => canonicalTimezone(''), 'timezone', 'INVALID_TIMEZONE');
    assert.equal(canonicalTimezone('america/new_york'), 'America/New_York');
    assert.equal(canonicalTimezone('UTC'), 'UTC');
  });
});

describe('expansion', () => {
  it('expands a weekly all-day event by date, end exclusive, each occurrence starting at 00:00 local', () => {
    const series = allDay('2026-03-06', '2026-03-07', 'America/New_York', 'FREQ=WEEKLY;COUNT=4');
    checkSeries(series);
    const occurrences = list(series, '2026-03-01T00:00:00Z', '2026-05-01T00:00:00Z');
    assert.deepEqual(
      occurrences.map((o) => (o.is_all_day ? [o.start_date, o.end_date] : [])),
      [
        ['2026-03-06', '2026-03-07'],
        ['2026-03-13', '2026-03-14'],
        ['2026-03-20', '2026-03-21'],
        ['2026-03-27', '2026-03-28'],
      ],
    );
    // The recurrence id is the start of the date in the event's zone (EST, then EDT).
    assert.deepEqual(starts(occurrences).slice(0, 2), ['2026-03-06T05:00:00.000Z', '2026-03-13T04:00:00.000Z']);
  });

  it('lists an all-day occurrence that overlaps the window edge, and not one that only touches it', () => {
    // Two-day event Fri–Sat (end_date Sunday, exclusive), every week.
    const series = allDay('2026-06-05', '2026-06-07', 'Europe/Berlin', 'FREQ=WEEKLY');
    // The window starts Saturday noon Berlin: Friday's occurrence still runs then.
    const overlapping = list(series, '2026-06-06T10:00:00Z', '2026-06-08T00:00:00Z');
    assert.deepEqual(
      overlapping.map((o) => (o.is_all_day ? o.start_date : '')),
      ['2026-06-05'],
    );
    // From Sunday 00:00 Berlin (Saturday 22:00Z) to the next Friday 00:00 Berlin: one ended exactly
    // at `from`, the next starts exactly at `to`.
    assert.deepEqual(list(series, '2026-06-06T22:00:00Z', '2026-06-11T22:00:00Z').length, 0);
    assert.deepEqual(list(series, '2026-06-06T21:59:59Z', '2026-06-11T22:00:01Z').length, 2);
  });

  it('lists a series started years ago at its local time today', () => {
    const series = timed('2019-01-07T14:00:00Z', '2019-01-07T15:00:00Z', 'America/New_York', 'FREQ=WEEKLY;BYDAY=MO,TH');
    const occurrences = list(series, '2026-03-01T00:00:00Z', '2026-04-01T00:00:00Z');
    assert.equal(occurrences.length, 9);
    for (const o of occurrences) assert.equal(localTime(o.recurrence_id, 'America/New_York'), '09:00');
  });

  it('lists a COUNT series to its end, and refuses at storing one too sparse for its FREQ to expand', () => {
    const long = timed('2024-01-01T09:00:00Z', '2024-01-01T10:00:00Z', 'Europe/Berlin', 'FREQ=DAILY;COUNT=1000');
    checkSeries(long);
    assert.deepEqual(starts(list(long, '2026-09-01T00:00:00Z', '2027-01-01T00:00:00Z')).slice(-2), [
      '2026-09-25T08:00:00.000Z',
      '2026-09-26T08:00:00.000Z',
    ]);
    // New Year's Day as a DAILY rule: 30 occurrences are about 10,600 daily periods.
    const newYear = timed(
      '2024-01-01T09:00:00Z',
      '2024-01-01T10:00:00Z',
      'UTC',
      'FREQ=DAILY;BYMONTH=1;BYMONTHDAY=1;COUNT=30',
    );
    refused(() => checkSeries(newYear), 'rrule', 'RULE_TOO_COSTLY');
    checkSeries({ ...newYear, rrule: 'FREQ=YEARLY;COUNT=30' });
  });

  it('lists a timed occurrence that started before the window and ends inside it', () => {
    const series = timed('2026-01-05T09:00:00Z', '2026-01-05T11:00:00Z', 'UTC', 'FREQ=DAILY');
    assert.deepEqual(starts(list(series, '2026-01-06T10:00:00Z', '2026-01-07T09:00:00Z')), [
      '2026-01-06T09:00:00.000Z',
    ]);
    // An occurrence that ends exactly at `from` or starts exactly at `to` is outside.
    assert.deepEqual(starts(list(series, '2026-01-06T11:00:00Z', '2026-01-07T09:00:00Z')), []);
  });

  it('removes exactly the instances named in exdates', () => {
    const plain = timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'Europe/Berlin', 'FREQ=DAILY;COUNT=5');
    const withExdates = { ...plain, exdates: [at('2026-01-07T09:00:00Z'), at('2026-01-08T09:01:00Z')] };
    const all = starts(list(plain, '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z'));
    const kept = starts(list(withExdates, '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z'));
    // The exdate a minute off the 8th's start matches nothing; COUNT counts the excluded one.
    assert.deepEqual(
      kept,
      all.filter((s) => s !== '2026-01-07T09:00:00.000Z'),
    );
    assert.equal(kept.length, 4);
  });

  it('refuses an exdate that is not a timestamp', () => {
    const series = timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'UTC', 'FREQ=DAILY', [
      '2026-01-06T09:00:00Z',
      'not a date',
    ]);
    refused(() => checkSeries(series), 'exdates[1]', 'INVALID_EVENT_TIMES');
  });

  it('removes all-day instances named by their start in the zone', () => {
    const series = allDay('2026-03-02', '2026-03-03', 'America/New_York', 'FREQ=DAILY;COUNT=3', [
      '2026-03-03T05:00:00Z',
    ]);
    const dates = list(series, '2026-03-01T00:00:00Z', '2026-03-10T00:00:00Z').map((o) =>
      o.is_all_day ? o.start_date : '',
    );
    assert.deepEqual(dates, ['2026-03-02', '2026-03-04']);
  });

  it('ends at COUNT and at UNTIL (inclusive)', () => {
    const counted = timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'UTC', 'FREQ=WEEKLY;COUNT=5');
    assert.equal(list(counted, '2026-01-01T00:00:00Z', '2026-12-31T00:00:00Z').length, 5);
    const until = timed(
      '2026-01-05T09:00:00Z',
      '2026-01-05T10:00:00Z',
      'America/New_York',
      'FREQ=WEEKLY;UNTIL=20260126T090000Z',
    );
    checkSeries(until);
    assert.deepEqual(starts(list(until, '2026-01-01T00:00:00Z', '2026-12-31T00:00:00Z')), [
      '2026-01-05T09:00:00.000Z',
      '2026-01-12T09:00:00.000Z',
      '2026-01-19T09:00:00.000Z',
      '2026-01-26T09:00:00.000Z',
    ]);
    // An all-day series may give UNTIL as a date (RFC 5545's form for DATE starts), inclusive.
    const dated = allDay('2026-01-05', '2026-01-06', 'Europe/Berlin', 'FREQ=DAILY;UNTIL=20260107');
    assert.deepEqual(
      list(dated, '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z').map((o) => (o.is_all_day ? o.start_date : '')),
      ['2026-01-05', '2026-01-06', '2026-01-07'],
    );
  });

  it('skips the months without a 31st for BYMONTHDAY=31', () => {
    const series = timed('2026-01-31T10:00:00Z', '2026-01-31T11:00:00Z', 'UTC', 'FREQ=MONTHLY;BYMONTHDAY=31;COUNT=7');
    checkSeries(series);
    const months = list(series, '2026-01-01T00:00:00Z', '2027-01-01T00:00:00Z').map((o) =>
      o.recurrence_id.toISOString().slice(0, 10),
    );
    assert.deepEqual(months, [
      '2026-01-31',
      '2026-03-31',
      '2026-05-31',
      '2026-07-31',
      '2026-08-31',
      '2026-10-31',
      '2026-12-31',
    ]);
  });

  it('refuses a window over 366 days or reversed, and more occurrences than the cap', () => {
    const series = timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'UTC', 'FREQ=DAILY');
    refused(() => list(series, '2026-01-01T00:00:00Z', '2027-01-03T00:00:00Z'), 'to', 'INVALID_WINDOW');
    refused(() => list(series, '2026-02-01T00:00:00Z', '2026-01-01T00:00:00Z'), 'to', 'INVALID_WINDOW');
    assert.equal(list(series, '2026-01-01T00:00:00Z', '2027-01-02T00:00:00Z').length, 362);
    refused(
      () => expandOccurrences(series, { from: at('2026-01-01T00:00:00Z'), to: at('2026-03-01T00:00:00Z') }, 10),
      'to',
      'TOO_MANY_OCCURRENCES',
    );
    // An hourly series over a full year fits under the default cap (8,784 < MAX_OCCURRENCES).
    const hourly = timed('2026-01-01T00:00:00Z', '2026-01-01T00:30:00Z', 'Europe/Berlin', 'FREQ=HOURLY');
    assert.ok(list(hourly, '2026-01-01T00:00:00Z', '2027-01-01T00:00:00Z').length <= MAX_OCCURRENCES);
  });

  it('refuses a stored FREQ=SECONDLY series (no longer accepted) over a 366-day window by its caps, in under a second of CPU', () => {
    const series = timed('2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z', 'America/New_York', 'FREQ=SECONDLY');
    const ms = cpuMs(() => {
      const err = refused(() => list(series, '2026-01-01T00:00:00Z', '2027-01-02T00:00:00Z'), 'to', 'RULE_TOO_COSTLY');
      assert.match(err.message, /narrow/);
    });
    assert.ok(ms < 1000, `took ${ms} ms`);
    // A minute of it is fine.
    assert.equal(list(series, '2026-06-01T00:00:00Z', '2026-06-01T00:01:00Z').length, 60);
  });
});

describe('next occurrence', () => {
  const series = timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'UTC', 'FREQ=DAILY;COUNT=5', [
    '2026-01-07T09:00:00Z',
  ]);

  it('is the first start strictly after the instant, skipping exdates', () => {
    assert.equal(nextOccurrence(series, at('2026-01-01T00:00:00Z'))?.toISOString(), '2026-01-05T09:00:00.000Z');
    assert.equal(nextOccurrence(series, at('2026-01-05T09:00:00Z'))?.toISOString(), '2026-01-06T09:00:00.000Z');
    assert.equal(nextOccurrence(series, at('2026-01-06T12:00:00Z'))?.toISOString(), '2026-01-08T09:00:00.000Z');
  });

  it('is null for an ended series and for a single event', () => {
    assert.equal(nextOccurrence(series, at('2026-01-09T09:00:00Z')), null);
    assert.equal(nextOccurrence({ ...series, rrule: null }, at('2020-01-01T00:00:00Z')), null);
  });

  it('is the start of the next date in the zone for an all-day series', () => {
    const days = allDay('2026-03-06', '2026-03-07', 'America/New_York', 'FREQ=WEEKLY');
    // Friday 6 March 12:00 New York: that day's occurrence has begun; the next is 13 March 00:00 EDT.
    assert.equal(nextOccurrence(days, at('2026-03-06T17:00:00Z'))?.toISOString(), '2026-03-13T04:00:00.000Z');
    assert.equal(nextOccurrence(days, at('2026-03-06T04:59:59Z'))?.toISOString(), '2026-03-06T05:00:00.000Z');
  });
});

describe('series end', () => {
  it('is the end of the last occurrence for COUNT, an upper bound for UNTIL, and null without either', () => {
    assert.equal(
      seriesEnd(
        timed('2026-03-06T07:30:00Z', '2026-03-06T08:00:00Z', 'America/New_York', 'FREQ=DAILY;COUNT=5'),
      )?.toISOString(),
      '2026-03-11T07:00:00.000Z',
      'the skipped DST-gap day is not counted',
    );
    assert.equal(
      seriesEnd(
        timed('2026-06-01T09:00:00Z', '2026-06-01T10:00:00Z', 'UTC', 'FREQ=DAILY;UNTIL=20260610T090000Z'),
      )?.toISOString(),
      '2026-06-10T10:00:00.000Z',
    );
    assert.equal(
      seriesEnd(allDay('2026-07-01', '2026-07-03', 'America/New_York', 'FREQ=WEEKLY;UNTIL=20260715'))?.toISOString(),
      '2026-07-17T04:00:00.000Z',
    );
    assert.equal(seriesEnd(timed('2026-06-01T09:00:00Z', '2026-06-01T10:00:00Z', 'UTC', 'FREQ=WEEKLY')), null);
  });
});

describe('occurrence ids', () => {
  const series = timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'UTC', 'FREQ=WEEKLY;COUNT=3', [
    '2026-01-12T09:00:00Z',
  ]);

  it('knows which instants are occurrences of a series', () => {
    assert.equal(isOccurrence(series, at('2026-01-05T09:00:00Z')), true);
    assert.equal(isOccurrence(series, at('2026-01-19T09:00:00Z')), true);
    assert.equal(isOccurrence(series, at('2026-01-12T09:00:00Z')), false, 'excluded');
    assert.equal(isOccurrence(series, at('2026-01-19T09:00:01Z')), false, 'a second off');
    assert.equal(isOccurrence(series, at('2025-12-29T09:00:00Z')), false, 'before the start');
    assert.equal(isOccurrence(series, at('2026-01-26T09:00:00Z')), false, 'after COUNT');
    assert.equal(isOccurrence(series, at('invalid')), false);
  });

  it('knows all-day occurrences by the start of their date in the zone', () => {
    const days = allDay('2026-03-06', '2026-03-07', 'Europe/Berlin', 'FREQ=WEEKLY');
    assert.equal(isOccurrence(days, at('2026-03-12T23:00:00Z')), true);
    assert.equal(isOccurrence(days, at('2026-03-13T00:00:00Z')), false);
  });
});

describe('this_and_following split', () => {
  /** Lists a split's two series over the window and checks they give the original occurrences. */
  function assertSplitKeepsOccurrences(
    series: Series,
    recurrenceId: string,
    from: string,
    to: string,
  ): Extract<ReturnType<typeof splitSeries>, { kind: 'split' }> {
    const original = list(series, from, to);
    const split = splitSeries(series, at(recurrenceId));
    assert.equal(split.kind, 'split');
    if (split.kind !== 'split') throw new Error('unreachable');
    const ending: Series = { ...series, rrule: split.ending.rrule, exdates: split.ending.exdates };
    const following: Series = {
      ...series,
      times: split.following.times,
      rrule: split.following.rrule,
      exdates: split.following.exdates,
    };
    checkSeries(ending);
    checkSeries(following);
    const before = list(ending, from, to);
    const after = list(following, from, to);
    assert.ok(
      before.every((o) => o.recurrence_id.getTime() < at(recurrenceId).getTime()),
      'the old series stops before the occurrence',
    );
    assert.equal(
      after[0]?.recurrence_id.toISOString(),
      at(recurrenceId).toISOString(),
      'the new series starts at the occurrence',
    );
    assert.deepEqual([...before, ...after], original);
    return split;
  }

  it('splits a COUNT series: UNTIL one second before, the new COUNT is what was left', () => {
    // Weekly Mondays 09:00 New York from 23 February, 10 times, 9 March excluded; split across DST.
    const series = timed(
      '2026-02-23T14:00:00Z',
      '2026-02-23T15:00:00Z',
      'America/New_York',
      'FREQ=WEEKLY;BYDAY=MO;COUNT=10',
      ['2026-03-09T13:00:00Z', '2026-03-30T13:00:00Z'],
    );
    const split = assertSplitKeepsOccurrences(
      series,
      '2026-03-16T13:00:00Z',
      '2026-02-01T00:00:00Z',
      '2026-06-01T00:00:00Z',
    );
    assert.equal(split.ending.rrule, 'FREQ=WEEKLY;BYDAY=MO;UNTIL=20260316T125959Z');
    // 23 Feb, 2 Mar and the excluded 9 Mar are spent: 7 of 10 left.
    assert.equal(split.following.rrule, 'FREQ=WEEKLY;BYDAY=MO;COUNT=7');
    assert.deepEqual(
      split.ending.exdates.map((d) => d.toISOString()),
      ['2026-03-09T13:00:00.000Z'],
    );
    assert.deepEqual(
      split.following.exdates.map((d) => d.toISOString()),
      ['2026-03-30T13:00:00.000Z'],
    );
    assert.deepEqual(split.following.times, {
      is_all_day: false,
      start_at: at('2026-03-16T13:00:00Z'),
      end_at: at('2026-03-16T14:00:00Z'),
    });
  });

  it('splits an UNTIL series and an unbounded one, keeping the rule as sent', () => {
    const until = timed(
      '2026-01-05T09:00:00Z',
      '2026-01-05T10:00:00Z',
      'Europe/Berlin',
      'freq=daily;interval=2;until=20260301T000000Z',
    );
    const split = assertSplitKeepsOccurrences(
      until,
      '2026-01-15T09:00:00Z',
      '2026-01-01T00:00:00Z',
      '2026-04-01T00:00:00Z',
    );
    assert.equal(split.ending.rrule, 'freq=daily;interval=2;UNTIL=20260115T085959Z');
    assert.equal(split.following.rrule, 'freq=daily;interval=2;until=20260301T000000Z');
    const unbounded = timed('2026-01-31T10:00:00Z', '2026-01-31T11:00:00Z', 'UTC', 'FREQ=MONTHLY;BYMONTHDAY=31');
    assertSplitKeepsOccurrences(unbounded, '2026-05-31T10:00:00Z', '2026-01-01T00:00:00Z', '2026-12-31T00:00:00Z');
  });

  it('splits an all-day series at the start of the occurrence’s date', () => {
    const series = allDay('2026-03-02', '2026-03-04', 'America/New_York', 'FREQ=WEEKLY;BYDAY=MO,TH;COUNT=8');
    const split = assertSplitKeepsOccurrences(
      series,
      '2026-03-12T04:00:00Z',
      '2026-03-01T00:00:00Z',
      '2026-05-01T00:00:00Z',
    );
    assert.equal(split.following.rrule, 'FREQ=WEEKLY;BYDAY=MO,TH;COUNT=5');
    assert.deepEqual(split.following.times, { is_all_day: true, start_date: '2026-03-12', end_date: '2026-03-14' });
  });

  it('keeps every occurrence for split points across rule shapes, DST gaps and COUNT', () => {
    const shapes: Series[] = [
      timed('2026-03-05T07:30:00Z', '2026-03-05T08:00:00Z', 'America/New_York', 'FREQ=DAILY;COUNT=12'),
      timed(
        '2026-01-05T08:00:00Z',
        '2026-01-05T09:00:00Z',
        'Europe/Berlin',
        'FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR;WKST=SU;COUNT=15',
      ),
      timed('2026-01-30T15:00:00Z', '2026-01-30T16:00:00Z', 'Europe/Berlin', 'FREQ=MONTHLY;BYDAY=-1FR;COUNT=9'),
      timed(
        '2026-01-05T14:00:00Z',
        '2026-01-05T14:30:00Z',
        'America/New_York',
        'FREQ=DAILY;BYHOUR=9,17;BYDAY=MO,TU,WE,TH,FR;UNTIL=20260320T000000Z',
      ),
      timed('2026-01-15T10:00:00Z', '2026-01-15T10:05:00Z', 'UTC', 'FREQ=MONTHLY;BYMONTHDAY=1,15;BYSETPOS=-1;COUNT=8'),
      allDay('2026-01-31', '2026-02-01', 'America/Santiago', 'FREQ=MONTHLY;COUNT=6'),
    ];
    for (const series of shapes) {
      const occurrences = list(series, '2026-01-01T00:00:00Z', '2026-12-31T00:00:00Z');
      assert.ok(occurrences.length >= 6, series.rrule);
      // Every occurrence but the first for short series, about eight spread over longer ones.
      const step = Math.max(1, Math.floor(occurrences.length / 8));
      for (const o of occurrences.slice(1).filter((_, i) => i % step === 0)) {
        assertSplitKeepsOccurrences(
          series,
          o.recurrence_id.toISOString(),
          '2026-01-01T00:00:00Z',
          '2026-12-31T00:00:00Z',
        );
      }
    }
  });

  it('is the whole series at the first occurrence, and refuses an id that is not an occurrence', () => {
    const series = timed('2026-01-05T09:00:00Z', '2026-01-05T10:00:00Z', 'UTC', 'FREQ=DAILY;COUNT=5', [
      '2026-01-07T09:00:00Z',
    ]);
    assert.deepEqual(splitSeries(series, at('2026-01-05T09:00:00Z')), { kind: 'whole_series' });
    refused(() => splitSeries(series, at('2026-01-06T09:30:00Z')), 'recurrence_id', 'NOT_AN_OCCURRENCE');
    refused(() => splitSeries(series, at('2026-01-07T09:00:00Z')), 'recurrence_id', 'NOT_AN_OCCURRENCE');
  });
});

describe('refused rules', () => {
  const times: EventTimes = {
    is_all_day: false,
    start_at: at('2026-01-05T09:00:00Z'),
    end_at: at('2026-01-05T10:00:00Z'),
  };
  const check = (rrule: string, timezone = 'UTC') => checkSeries({ times, timezone, rrule, exdates: [] });

  it('refuses malformed rules on rrule, saying what to change', () => {
    const cases: [string, RegExp][] = [
      ['FREQ=FORTNIGHTLY', /FREQ must be one of/],
      ['DTSTART:20260105T090000Z\nRRULE:FREQ=DAILY', /without DTSTART/],
      ['DTSTART=20260105T090000Z;FREQ=DAILY', /without DTSTART/],
      ['RRULE:FREQ=DAILY', /send only the value, like FREQ=DAILY/],
      ['FREQ=DAILY;UNTIL=20260301T000000', /UTC date-time/],
      ['FREQ=DAILY;UNTIL=20260301', /UTC date-time/],
      ['FREQ=DAILY;UNTIL=20260231T000000Z', /not a real date/],
      ['this is not a rule', /without DTSTART|malformed/],
      ['garbage', /malformed part/],
      ['', /1 to 500 characters/],
      ['INTERVAL=2', /needs FREQ/],
      ['FREQ=DAILY;COUNT=3;UNTIL=20260301T000000Z', /both COUNT and UNTIL/],
      ['FREQ=DAILY;COUNT=0', /COUNT must be an integer/],
      ['FREQ=DAILY;COUNT=1000000', /COUNT must be an integer from 1 to 1000 \(for a longer series, use UNTIL\)/],
      ['FREQ=DAILY;INTERVAL=0', /INTERVAL must be/],
      ['FREQ=MONTHLY;BYMONTHDAY=32', /BYMONTHDAY=32/],
      ['FREQ=WEEKLY;BYDAY=XX', /BYDAY/],
      ['FREQ=WEEKLY;BYDAY=1MO', /ordinal/],
      ['FREQ=DAILY;FOO=1', /unsupported part FOO/],
      ['FREQ=DAILY;FREQ=WEEKLY', /FREQ twice/],
      ['FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=31', /never occurs/],
      ['FREQ=DAILY;UNTIL=20260101T000000Z', /before the event’s start/],
      ['FREQ=WEEKLY;BYDAY=TU', /does not produce the event’s start/],
      // More often than hourly makes every listing window a 400 (too many occurrences to expand).
      ['FREQ=SECONDLY', /FREQ=HOURLY or coarser/],
      ['freq=minutely;interval=30', /FREQ=HOURLY or coarser/],
    ];
    for (const [rrule, message] of cases) {
      const err = refused(() => check(rrule), 'rrule', 'INVALID_RRULE');
      assert.match(err.message, message, rrule);
    }
  });

  it('refuses event times that are not a span', () => {
    refused(
      () => checkSeries(timed('2026-01-05T10:00:00Z', '2026-01-05T09:00:00Z', 'UTC', 'FREQ=DAILY')),
      'end_at',
      'INVALID_EVENT_TIMES',
    );
    refused(
      () => checkSeries(allDay('2026-01-05', '2026-01-05', 'UTC', 'FREQ=DAILY')),
      'end_date',
      'INVALID_EVENT_TIMES',
    );
    refused(
      () => checkSeries(allDay('2026-02-30', '2026-03-02', 'UTC', 'FREQ=DAILY')),
      'start_date',
      'INVALID_EVENT_TIMES',
    );
  });

  it('refuses sub-daily repetition of an all-day event', () => {
    for (const rrule of ['FREQ=HOURLY', 'FREQ=DAILY;BYHOUR=9']) {
      refused(() => checkSeries(allDay('2026-01-05', '2026-01-06', 'UTC', rrule)), 'rrule', 'INVALID_RRULE');
    }
  });

  it('refuses FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO from 2044-02-29 in under a second of CPU', () => {
    // Its next occurrence is 28 years (over 10,000 daily periods) later.
    const series = timed(
      '2044-02-29T09:00:00Z',
      '2044-02-29T10:00:00Z',
      'UTC',
      'FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO',
    );
    const ms = cpuMs(() => refused(() => checkSeries(series), 'rrule', 'RULE_TOO_COSTLY'));
    assert.ok(ms < 1000, `took ${ms} ms`);
    // The same dates as a yearly rule are fine.
    checkSeries({ ...series, rrule: 'FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;COUNT=3' });
  });

  it('refuses rules that never produce a second occurrence in under a second of CPU', () => {
    for (const rrule of ['FREQ=DAILY;BYSETPOS=2;BYHOUR=9', 'FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=30,31']) {
      const ms = cpuMs(() => {
        try {
          check(rrule);
          assert.fail(`${rrule} was accepted`);
        } catch (err) {
          assert.ok(err instanceof RecurrenceError && err.field === 'rrule', String(err));
        }
      });
      assert.ok(ms < 1000, `${rrule} took ${ms} ms`);
    }
  });
});
