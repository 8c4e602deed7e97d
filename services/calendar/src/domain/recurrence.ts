import { YEARS } from '@workauto/grpc';
import { RRuleTemporal } from 'rrule-temporal';
import { Temporal } from 'temporal-polyfill';
import { RecurrenceError } from './errors.js';
import { canonicalTimezone } from './timezones.js';

/**
 * Recurring calendar events (docs/calendar.md "Recurrence rules"): the pure recurrence engine of the calendar
 * service, its only expander (docs/calendar.md). No I/O: the handlers and the occurrence index call
 * it with stored rows.
 *
 * A series is an event with an `rrule`: an RFC 5545 RRULE value (`FREQ=WEEKLY;BYDAY=MO`) without the
 * `RRULE:` prefix and without DTSTART — the event's start is DTSTART and must be the first occurrence.
 * It is expanded by `rrule-temporal` in the event's IANA time zone, so a weekly 09:00 stays 09:00 local
 * across DST; a local start that does not exist that day (a DST gap) is skipped and not counted (RFC 5545
 * §3.3.10); an ambiguous local time takes the earlier offset (§3.3.5). All-day series are expanded on
 * plain dates; their occurrence starts at the beginning of its date in the event's time zone.
 *
 * Every expansion is bounded: windows of at most MAX_WINDOW_DAYS, at most MAX_OCCURRENCES per
 * expansion, COUNT at most MAX_COUNT, and the library scans at most MAX_PERIODS recurrence periods and
 * MAX_CANDIDATES candidate times per call, so the worst rule costs a bounded amount of CPU (the tests
 * hold it under a second; docs/calendar.md). Beyond those a RecurrenceError (a 400 on the named field)
 * is thrown, never a hang.
 */

export { RecurrenceError, type RecurrenceErrorKind } from './errors.js';
export { canonicalTimezone } from './timezones.js';

export const RRULE_MAX_LENGTH = 500;
/**
 * COUNT above this is refused. A COUNT series is expanded from its start on every listing (its
 * occurrences depend on their index), so its cost grows with COUNT (docs/calendar.md); a longer
 * series uses UNTIL, which is expanded from the window.
 */
export const MAX_COUNT = 1_000;
export const MAX_INTERVAL = 1_000;
/** GET /events windows are at most 366 days (docs/calendar.md "Limits (all 400s, never a hang)"). */
export const MAX_WINDOW_DAYS = 366;
/** Occurrences one expansion returns at most (a year of an hourly series is 8,784). */
export const MAX_OCCURRENCES = 10_000;
/** rrule-temporal's caps: outer recurrence periods and candidate date-times scanned per call. */
const MAX_PERIODS = 10_000;
const MAX_CANDIDATES = 100_000;

const DAY_MS = 86_400_000;

/** When an event happens: a timed event (instants) or an all-day event (dates, end exclusive). */
export type EventTimes =
  { is_all_day: false; start_at: Date; end_at: Date } | { is_all_day: true; start_date: string; end_date: string };

/** A recurring event's master: its first occurrence's times, time zone, rule and excluded starts. */
export interface Series {
  times: EventTimes;
  /** IANA name; the rule is expanded in it. */
  timezone: string;
  rrule: string;
  /** Original starts (recurrence ids) removed from the series. */
  exdates: readonly Date[];
}

/** One instance: its times and its recurrence id (its original start, which never changes). */
export type Occurrence = EventTimes & { recurrence_id: Date };

/** What `this_and_following` does to a series at one occurrence. */
export type SeriesSplit =
  /** The occurrence is the first one: the edit applies to the whole series (`all`). */
  | { kind: 'whole_series' }
  | {
      kind: 'split';
      /** The old master keeps its start; its rule ends one second before the occurrence. */
      ending: { rrule: string; exdates: Date[] };
      /** The new master starts at the occurrence; COUNT is what the old rule had left. */
      following: { times: EventTimes; rrule: string; exdates: Date[] };
    };

// ---- parsing -------------------------------------------------------------------------------------

type Freq = 'YEARLY' | 'MONTHLY' | 'WEEKLY' | 'DAILY' | 'HOURLY' | 'MINUTELY' | 'SECONDLY';
const FREQS: readonly Freq[] = ['YEARLY', 'MONTHLY', 'WEEKLY', 'DAILY', 'HOURLY', 'MINUTELY', 'SECONDLY'];
const WEEKDAYS = ['MO', 'TU', 'WE', 'TH', 'FR', 'SA', 'SU'];
/** Numeric list parts: allowed magnitude and whether a negative (from the end) value is allowed. */
const NUMERIC_PARTS: Record<string, { min: number; max: number; signed: boolean }> = {
  BYSECOND: { min: 0, max: 60, signed: false },
  BYMINUTE: { min: 0, max: 59, signed: false },
  BYHOUR: { min: 0, max: 23, signed: false },
  BYMONTHDAY: { min: 1, max: 31, signed: true },
  BYYEARDAY: { min: 1, max: 366, signed: true },
  BYWEEKNO: { min: 1, max: 53, signed: true },
  BYMONTH: { min: 1, max: 12, signed: false },
  BYSETPOS: { min: 1, max: 366, signed: true },
};
const PART_NAMES = ['FREQ', 'INTERVAL', 'COUNT', 'UNTIL', 'BYDAY', 'WKST', ...Object.keys(NUMERIC_PARTS)];
const SUB_DAILY: readonly Freq[] = ['HOURLY', 'MINUTELY', 'SECONDLY'];
/** Refused when storing a series (the engine still expands those stored before). */
const SUB_HOURLY: readonly Freq[] = ['MINUTELY', 'SECONDLY'];
const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

type Until = { kind: 'utc'; at: Date } | { kind: 'date'; date: Temporal.PlainDate };

interface ParsedRule {
  /** The parts as sent (raw) and uppercased, in the order sent. */
  parts: { name: string; value: string; raw: string }[];
  freq: Freq;
  count?: number;
  until?: Until;
}

function invalid(message: string): RecurrenceError {
  return new RecurrenceError('rrule', 'INVALID_RRULE', message);
}

function parseUntil(value: string, isAllDay: boolean): Until {
  const hint = isAllDay
    ? 'UNTIL must be a UTC date-time like 20261231T235959Z (or, for an all-day event, a date like 20261231)'
    : 'UNTIL must be a UTC date-time like 20261231T235959Z (RFC 5545: UTC when the start has a time zone)';
  const m = /^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})(Z)?)?$/.exec(value);
  if (!m || (m[4] !== undefined && m[7] === undefined) || (m[4] === undefined && !isAllDay))
    throw invalid(`has UNTIL=${value}: ${hint}`);
  try {
    const date = Temporal.PlainDate.from(
      { year: Number(m[1]), month: Number(m[2]), day: Number(m[3]) },
      { overflow: 'reject' },
    );
    if (m[4] === undefined) return { kind: 'date', date };
    const time = Temporal.PlainTime.from(
      { hour: Number(m[4]), minute: Number(m[5]), second: Number(m[6]) },
      { overflow: 'reject' },
    );
    return { kind: 'utc', at: new Date(date.toZonedDateTime({ timeZone: 'UTC', plainTime: time }).epochMilliseconds) };
  } catch {
    throw invalid(`has UNTIL=${value}, which is not a real date and time: ${hint}`);
  }
}

function parseNumbers(name: string, value: string): number[] {
  const spec = NUMERIC_PARTS[name]!;
  return value.split(',').map((item) => {
    const n = /^[+-]?\d{1,3}$/.test(item) ? Number(item) : NaN;
    const ok =
      Number.isInteger(n) &&
      Math.abs(n) >= spec.min &&
      Math.abs(n) <= spec.max &&
      (spec.signed ? n !== 0 : !item.startsWith('-') && !item.startsWith('+'));
    if (!ok) {
      const range = spec.signed
        ? `${spec.min} to ${spec.max} or -${spec.max} to -${spec.min}`
        : `${spec.min} to ${spec.max}`;
      throw invalid(`has ${name}=${value}: each value must be an integer from ${range}`);
    }
    return n;
  });
}

/**
 * Checks an event's rrule on its own (the rule text and the parts RFC 5545 allows together) and
 * returns it parsed. Throws RecurrenceError on `rrule` saying what to change.
 */
function parseRrule(text: string, isAllDay: boolean): ParsedRule {
  if (text.length === 0 || text.length > RRULE_MAX_LENGTH)
    throw invalid(`must be an RRULE value of 1 to ${RRULE_MAX_LENGTH} characters, like FREQ=WEEKLY;BYDAY=MO`);
  if (/^RRULE:/i.test(text))
    throw invalid(`starts with RRULE: — send only the value, like ${text.slice(6).trim() || 'FREQ=WEEKLY;BYDAY=MO'}`);
  if (/DTSTART|[\s:]/i.test(text)) {
    throw invalid(
      'must be a single RRULE value without DTSTART, RDATE or EXDATE (the event’s start_at or start_date is the series start; excluded starts go in exdates)',
    );
  }
  const parts: ParsedRule['parts'] = [];
  for (const raw of text.split(';')) {
    const [rawName, rawValue, extra] = raw.split('=');
    if (!rawName || !rawValue || extra !== undefined)
      throw invalid(`has a malformed part ${JSON.stringify(raw)}: parts are NAME=VALUE separated by ;`);
    const name = rawName.toUpperCase();
    if (!PART_NAMES.includes(name)) throw invalid(`has an unsupported part ${rawName}: use ${PART_NAMES.join(', ')}`);
    if (parts.some((p) => p.name === name)) throw invalid(`has ${name} twice`);
    parts.push({ name, value: rawValue.toUpperCase(), raw });
  }
  const get = (name: string) => parts.find((p) => p.name === name)?.value;
  const freq = get('FREQ');
  if (!freq) throw invalid('needs FREQ, like FREQ=WEEKLY');
  if (!FREQS.includes(freq as Freq)) throw invalid(`has FREQ=${freq}: FREQ must be one of ${FREQS.join(', ')}`);
  const rule: ParsedRule = { parts, freq: freq as Freq };

  const interval = get('INTERVAL');
  if (
    interval !== undefined &&
    !(/^\d{1,4}$/.test(interval) && Number(interval) >= 1 && Number(interval) <= MAX_INTERVAL)
  ) {
    throw invalid(`has INTERVAL=${interval}: INTERVAL must be an integer from 1 to ${MAX_INTERVAL}`);
  }
  const count = get('COUNT');
  const until = get('UNTIL');
  if (count !== undefined && until !== undefined) throw invalid('has both COUNT and UNTIL: keep one of them');
  if (count !== undefined) {
    if (!(/^\d{1,5}$/.test(count) && Number(count) >= 1 && Number(count) <= MAX_COUNT))
      throw invalid(
        `has COUNT=${count}: COUNT must be an integer from 1 to ${MAX_COUNT} (for a longer series, use UNTIL)`,
      );
    rule.count = Number(count);
  }
  if (until !== undefined) rule.until = parseUntil(until, isAllDay);

  const numbers = new Map<string, number[]>();
  for (const name of Object.keys(NUMERIC_PARTS)) {
    const value = get(name);
    if (value !== undefined) numbers.set(name, parseNumbers(name, value));
  }
  const byDay = get('BYDAY');
  if (byDay !== undefined) {
    for (const item of byDay.split(',')) {
      const m = /^([+-]?\d{1,2})?([A-Z]{2})$/.exec(item);
      if (
        !m ||
        !WEEKDAYS.includes(m[2]!) ||
        (m[1] !== undefined && (Number(m[1]) === 0 || Math.abs(Number(m[1])) > 53))
      ) {
        throw invalid(
          `has BYDAY=${byDay}: each value is a weekday (${WEEKDAYS.join(', ')}), optionally with an ordinal like 1MO or -1FR`,
        );
      }
      if (
        m[1] !== undefined &&
        (!['MONTHLY', 'YEARLY'].includes(freq) || (freq === 'YEARLY' && numbers.has('BYWEEKNO')))
      ) {
        throw invalid(
          `has BYDAY=${byDay}: an ordinal weekday (${item}) needs FREQ=MONTHLY or FREQ=YEARLY without BYWEEKNO`,
        );
      }
    }
  }
  const wkst = get('WKST');
  if (wkst !== undefined && !WEEKDAYS.includes(wkst))
    throw invalid(`has WKST=${wkst}: WKST is a weekday (${WEEKDAYS.join(', ')})`);
  // RFC 5545 §3.3.10: the parts that are meaningless with a frequency.
  if (numbers.has('BYMONTHDAY') && freq === 'WEEKLY')
    throw invalid('has BYMONTHDAY with FREQ=WEEKLY, which RFC 5545 does not allow: use BYDAY or another FREQ');
  if (numbers.has('BYYEARDAY') && ['DAILY', 'WEEKLY', 'MONTHLY'].includes(freq))
    throw invalid(`has BYYEARDAY with FREQ=${freq}, which RFC 5545 does not allow`);
  if (numbers.has('BYWEEKNO') && freq !== 'YEARLY')
    throw invalid('has BYWEEKNO, which RFC 5545 allows only with FREQ=YEARLY');
  if (numbers.has('BYSETPOS') && !parts.some((p) => p.name.startsWith('BY') && p.name !== 'BYSETPOS')) {
    throw invalid('has BYSETPOS without another BYxxx part to select from');
  }
  if (isAllDay && (SUB_DAILY.includes(rule.freq) || ['BYHOUR', 'BYMINUTE', 'BYSECOND'].some((n) => numbers.has(n)))) {
    throw invalid(
      'of an all-day event cannot repeat within a day: use FREQ=DAILY or coarser, without BYHOUR, BYMINUTE or BYSECOND',
    );
  }
  // A day of the month that no allowed month has (BYMONTH=4;BYMONTHDAY=31) never occurs; the library
  // would only find that out after scanning its whole iteration budget.
  const monthDays = numbers.get('BYMONTHDAY');
  if (monthDays && monthDays.every((d) => d > 0)) {
    const months = numbers.get('BYMONTH') ?? [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    if (!months.some((m) => monthDays.some((d) => d <= DAYS_IN_MONTH[m - 1]!)))
      throw invalid('never occurs: no month in BYMONTH has a day in BYMONTHDAY');
  }
  return rule;
}

// ---- the library behind one interface --------------------------------------------------------------

/** A series checked and ready to expand: the library rule and how its values map to occurrences. */
interface Prepared {
  parsed: ParsedRule;
  timezone: string;
  isAllDay: boolean;
  /** DTSTART: the start in the event's zone, or for all-day events the start date at 00:00 UTC. */
  dtstart: Temporal.ZonedDateTime;
  /** Timed: length in milliseconds (exact time, so a 1-hour event stays 1 hour across DST). */
  durationMs: number;
  /** All-day: length in days. */
  durationDays: number;
  rule: RRuleTemporal;
  /** The same rule without exdates (COUNT counts excluded instances too: EXDATE is subtracted from the set the RRULE generates, RFC 5545 §3.8.5.3). */
  ruleWithoutExdates: () => RRuleTemporal;
}

/** The instant an all-day occurrence on `date` starts: the beginning of that date in the zone. */
function startOfDate(date: Temporal.PlainDate, timezone: string): Date {
  return new Date(date.toZonedDateTime(timezone).epochMilliseconds);
}

function localDate(at: Date, timezone: string): Temporal.PlainDate {
  return Temporal.Instant.fromEpochMilliseconds(at.getTime()).toZonedDateTimeISO(timezone).toPlainDate();
}

function utcMidnight(date: Temporal.PlainDate): Temporal.ZonedDateTime {
  return date.toZonedDateTime('UTC');
}

function parseDate(value: string, field: string): Temporal.PlainDate {
  try {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) throw new Error();
    return Temporal.PlainDate.from(value, { overflow: 'reject' });
  } catch {
    throw new RecurrenceError(field, 'INVALID_EVENT_TIMES', `${JSON.stringify(value)} is not a date: use YYYY-MM-DD`);
  }
}

/** RFC 5545 UTC date-time form: 20261231T235959Z. */
function formatUtc(at: Date): string {
  return at
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '');
}

/** Runs a library call; its failures become RecurrenceErrors on `field`. */
function guarded<T>(field: string, call: () => T): T {
  try {
    return call();
  } catch (err) {
    // rrule-temporal refuses with plain Errors (Temporal with RangeErrors); anything else is a bug.
    if (
      err instanceof RecurrenceError ||
      !(err instanceof Error) ||
      (err.constructor !== Error && err.constructor !== RangeError)
    )
      throw err;
    const { message } = err;
    if (/maximum iterations|candidate/i.test(message)) {
      throw new RecurrenceError(
        field,
        'RULE_TOO_COSTLY',
        field === 'rrule'
          ? `needs more than ${MAX_PERIODS} recurrence periods between occurrences (its occurrences are too rare for its FREQ): use a coarser FREQ, such as FREQ=YEARLY for a yearly date`
          : `the window needs more than ${MAX_PERIODS} recurrence periods of a series to expand: narrow from/to`,
      );
    }
    throw new RecurrenceError(
      field,
      'INVALID_RRULE',
      `${field === 'rrule' ? '' : 'rrule '}is not a valid RRULE: ${message}`,
    );
  }
}

function prepare(series: Series): Prepared {
  const timezone = canonicalTimezone(series.timezone);
  const { times } = series;
  const parsed = parseRrule(series.rrule, times.is_all_day);
  let dtstart: Temporal.ZonedDateTime;
  let durationMs = 0;
  let durationDays = 0;
  let ruleText = parsed.parts.map((p) => `${p.name}=${p.value}`).join(';');
  if (times.is_all_day) {
    const start = parseDate(times.start_date, 'start_date');
    const end = parseDate(times.end_date, 'end_date');
    durationDays = start.until(end, { largestUnit: 'days' }).days;
    if (durationDays < 1)
      throw new RecurrenceError(
        'end_date',
        'INVALID_EVENT_TIMES',
        'must be after start_date (it is exclusive: a one-day event ends the next day)',
      );
    // Dates are expanded on a UTC clock, which has no DST gap to skip a date at midnight.
    dtstart = utcMidnight(start);
    if (parsed.until) {
      const lastDate = parsed.until.kind === 'date' ? parsed.until.date : localDate(parsed.until.at, timezone);
      ruleText = ruleText.replace(
        /UNTIL=[^;]*/,
        `UNTIL=${formatUtc(new Date(utcMidnight(lastDate).epochMilliseconds))}`,
      );
    }
  } else {
    const start = times.start_at.getTime();
    const end = times.end_at.getTime();
    if (!Number.isFinite(start))
      throw new RecurrenceError('start_at', 'INVALID_EVENT_TIMES', 'is not a valid timestamp: use RFC 3339');
    if (!Number.isFinite(end) || end < start)
      throw new RecurrenceError('end_at', 'INVALID_EVENT_TIMES', 'must be a timestamp at or after start_at');
    durationMs = end - start;
    dtstart = Temporal.Instant.fromEpochMilliseconds(start).toZonedDateTimeISO(timezone);
  }
  series.exdates.forEach((at, i) => {
    if (!Number.isFinite(at.getTime()))
      throw new RecurrenceError(
        `exdates[${i}]`,
        'INVALID_EVENT_TIMES',
        'is not a valid timestamp: use the RFC 3339 start of the occurrence to exclude',
      );
  });
  const exDate = series.exdates.flatMap((at) => {
    if (!times.is_all_day) return [Temporal.Instant.fromEpochMilliseconds(at.getTime()).toZonedDateTimeISO(timezone)];
    // An all-day recurrence id is the start of its date in the zone; anything else matches nothing.
    const date = localDate(at, timezone);
    return startOfDate(date, timezone).getTime() === at.getTime() ? [utcMidnight(date)] : [];
  });
  const make = (withExdates: boolean) =>
    guarded(
      'rrule',
      () =>
        new RRuleTemporal({
          rruleString: ruleText,
          dtstart,
          maxIterations: MAX_PERIODS,
          maxCandidateEvaluations: MAX_CANDIDATES,
          ...(withExdates && exDate.length > 0 ? { exDate } : {}),
        }),
    );
  return {
    parsed,
    timezone,
    isAllDay: times.is_all_day,
    dtstart,
    durationMs,
    durationDays,
    rule: make(true),
    ruleWithoutExdates: () => make(false),
  };
}

/** The instant an all-day event's date (YYYY-MM-DD) begins in its time zone. */
export function startOfDay(date: string, timezone: string): Date {
  return startOfDate(parseDate(date, 'start_date'), canonicalTimezone(timezone));
}

/** Maps a library value (a start) to the occurrence it begins. */
function occurrenceAt(
  p: Prepared,
  start: { epochMilliseconds: number; toPlainDate(): { toString(): string } },
): Occurrence {
  if (p.isAllDay) {
    const date = Temporal.PlainDate.from(start.toPlainDate().toString());
    return {
      is_all_day: true,
      start_date: date.toString(),
      end_date: date.add({ days: p.durationDays }).toString(),
      recurrence_id: startOfDate(date, p.timezone),
    };
  }
  const at = new Date(start.epochMilliseconds);
  return { is_all_day: false, start_at: at, end_at: new Date(at.getTime() + p.durationMs), recurrence_id: at };
}

/** The occurrence's end instant (all-day: the start of its end date in the zone). */
function endOf(o: Occurrence, timezone: string): Date {
  return o.is_all_day ? startOfDate(Temporal.PlainDate.from(o.end_date), timezone) : o.end_at;
}

// ---- the operations ------------------------------------------------------------------------------

/**
 * Checks a series for storing (POST/PUT /events with an rrule): time zone, times, the rule, and that
 * the event's start is the rule's first occurrence (RFC 5545 leaves a start the rule does not produce
 * undefined). Rules whose occurrences are too rare for their FREQ, and finite rules the library cannot
 * expand within its caps, are refused here, so later expansions of a stored series stay within them.
 */
export function checkSeries(series: Series): void {
  const p = prepare(series);
  const { until } = p.parsed;
  const untilYear = until && (until.kind === 'utc' ? until.at.getUTCFullYear() : until.date.year);
  if (untilYear && (untilYear < YEARS.min || untilYear > YEARS.max))
    throw invalid(`has an UNTIL in ${untilYear}: UNTIL must be in the years ${YEARS.min} to ${YEARS.max}`);
  if (SUB_HOURLY.includes(p.parsed.freq)) {
    throw invalid(
      `has FREQ=${p.parsed.freq}, which repeats more often than hourly: a listing window of a few hours would hold more occurrences than one listing expands. Use FREQ=HOURLY or coarser`,
    );
  }
  const first = guarded('rrule', () => p.ruleWithoutExdates().all((_, i) => i < 2));
  const startText = p.isAllDay
    ? p.dtstart.toPlainDate().toString()
    : `${p.dtstart.toPlainDateTime().toString()} ${p.timezone}`;
  if (first.length === 0 || first[0]!.epochMilliseconds !== p.dtstart.epochMilliseconds) {
    if (first.length === 0 && p.parsed.until)
      throw invalid('ends (UNTIL) before the event’s start: the series would have no occurrence');
    throw invalid(
      `does not produce the event’s start (${startText}) as its first occurrence: move the start to a ${p.isAllDay ? 'date' : 'time'} the rule produces, or change the rule`,
    );
  }
  if (p.parsed.count !== undefined) guarded('rrule', () => p.ruleWithoutExdates().all());
}

/** Refuses a window docs/calendar.md does not allow (GET /events: from before to, at most 366 days). */
export function checkWindow(from: Date, to: Date): void {
  if (!Number.isFinite(from.getTime()))
    throw new RecurrenceError('from', 'INVALID_WINDOW', 'is not a valid timestamp: use RFC 3339');
  if (!Number.isFinite(to.getTime()) || to.getTime() <= from.getTime())
    throw new RecurrenceError('to', 'INVALID_WINDOW', 'must be a timestamp after from');
  if (to.getTime() - from.getTime() > MAX_WINDOW_DAYS * DAY_MS) {
    throw new RecurrenceError(
      'to',
      'INVALID_WINDOW',
      `must be at most ${MAX_WINDOW_DAYS} days after from: list a longer range in several windows`,
    );
  }
}

/**
 * The occurrences of a series that overlap [from, to) — start before `to`, end after `from` — in
 * ascending start order, exdates removed. More than `limit` occurrences is a RecurrenceError on `to`.
 */
export function expandOccurrences(
  series: Series,
  window: { from: Date; to: Date },
  limit = MAX_OCCURRENCES,
): Occurrence[] {
  const { from, to } = window;
  checkWindow(from, to);
  const p = prepare(series);
  let starts: ReturnType<RRuleTemporal['all']>;
  if (p.isAllDay) {
    // Candidate dates on the UTC date clock, one day of slack on each side, then the exact overlap.
    const first = localDate(from, p.timezone).subtract({ days: p.durationDays + 1 });
    const last = localDate(to, p.timezone).add({ days: 1 });
    starts = guarded('to', () => p.rule.between(utcMidnight(first), utcMidnight(last), true));
  } else {
    // Exclusive bounds: start > from - duration (so end > from) and start < to.
    starts = guarded('to', () => p.rule.between(new Date(from.getTime() - p.durationMs), to, false));
  }
  const occurrences = starts
    .map((start) => occurrenceAt(p, start))
    .filter((o) => o.recurrence_id.getTime() < to.getTime() && endOf(o, p.timezone).getTime() > from.getTime());
  if (occurrences.length > limit) {
    throw new RecurrenceError(
      'to',
      'TOO_MANY_OCCURRENCES',
      `a series has more than ${limit} occurrences between from and to: narrow the window`,
    );
  }
  return occurrences;
}

/**
 * next_occurrence: the first occurrence start strictly after `after` (for an all-day occurrence, the
 * start of its date in the zone), exdates skipped; null for a single event (no rrule) or a series
 * that has ended.
 */
export function nextOccurrence(event: Omit<Series, 'rrule'> & { rrule: string | null }, after: Date): Date | null {
  if (event.rrule === null) return null;
  const p = prepare({ ...event, rrule: event.rrule });
  if (p.isAllDay) {
    // Dates after the one `after` falls on start after it; that date's own start does not.
    const next = guarded('rrule', () => p.rule.next(utcMidnight(localDate(after, p.timezone)), false));
    return next ? occurrenceAt(p, next).recurrence_id : null;
  }
  const next = guarded('rrule', () => p.rule.next(after, false));
  return next ? new Date(next.epochMilliseconds) : null;
}

/**
 * When a series ends: at or after the end of its last occurrence (exactly it for COUNT rules; for
 * UNTIL rules UNTIL plus the event's length, an upper bound that needs no expansion), or null for
 * a series without an end. Listings skip a series whose end is before their window.
 */
export function seriesEnd(series: Series): Date | null {
  const p = prepare(series);
  const { until, count } = p.parsed;
  if (count !== undefined) {
    const all = guarded('rrule', () => p.ruleWithoutExdates().all());
    const last = all[all.length - 1];
    return last ? endOf(occurrenceAt(p, last), p.timezone) : null;
  }
  if (!until) return null;
  if (p.isAllDay) {
    const lastDate = until.kind === 'date' ? until.date : localDate(until.at, p.timezone);
    return startOfDate(lastDate.add({ days: p.durationDays }), p.timezone);
  }
  return new Date(
    (until.kind === 'utc' ? until.at.getTime() : startOfDate(until.date, p.timezone).getTime() + DAY_MS) + p.durationMs,
  );
}

/** The occurrence whose recurrence id (original start) is `recurrenceId`, or undefined. */
function occurrenceOf(p: Prepared, recurrenceId: Date): Occurrence | undefined {
  if (!Number.isFinite(recurrenceId.getTime())) return undefined;
  const probe = p.isAllDay ? utcMidnight(localDate(recurrenceId, p.timezone)) : recurrenceId;
  const found = guarded('recurrence_id', () => p.rule.next(probe, true));
  if (!found) return undefined;
  const occurrence = occurrenceAt(p, found);
  return occurrence.recurrence_id.getTime() === recurrenceId.getTime() ? occurrence : undefined;
}

/** Whether `recurrenceId` is the original start of an occurrence of the series (not an excluded one). */
export function isOccurrence(series: Series, recurrenceId: Date): boolean {
  const p = prepare(series);
  return occurrenceOf(p, recurrenceId) !== undefined;
}

/**
 * `this_and_following` at the occurrence `recurrenceId`: the old master's rule ends with UNTIL one
 * second before it (COUNT replaced by UNTIL), and a new master starts at it with the rule's other
 * parts and the COUNT the old rule had left. Listing both gives the original occurrences exactly.
 * Exdates at or after the occurrence move to the new master. At the first occurrence: `whole_series`.
 */
export function splitSeries(series: Series, recurrenceId: Date): SeriesSplit {
  const p = prepare(series);
  const occurrence = occurrenceOf(p, recurrenceId);
  if (!occurrence) {
    throw new RecurrenceError(
      'recurrence_id',
      'NOT_AN_OCCURRENCE',
      'is not the original start of an occurrence of this series: use the recurrence_id of a listed occurrence',
    );
  }
  const at = recurrenceId.getTime();
  if (at === occurrenceAt(p, p.dtstart).recurrence_id.getTime()) return { kind: 'whole_series' };

  // Whole seconds at or before one millisecond before the occurrence: one second before it for
  // whole-second starts, and never the occurrence itself (UNTIL is inclusive).
  const until = formatUtc(new Date(Math.floor((at - 1) / 1000) * 1000));
  const kept = p.parsed.parts.filter((part) => part.name !== 'COUNT' && part.name !== 'UNTIL').map((part) => part.raw);
  const ending = {
    rrule: [...kept, `UNTIL=${until}`].join(';'),
    exdates: series.exdates.filter((d) => d.getTime() < at),
  };

  let rrule = series.rrule;
  if (p.parsed.count !== undefined) {
    // COUNT counts generated instances, excluded ones included: those before the split are spent.
    const probe = p.isAllDay ? utcMidnight(localDate(recurrenceId, p.timezone)) : recurrenceId;
    const spent = guarded('recurrence_id', () => p.ruleWithoutExdates().between(p.dtstart, probe, true)).length - 1;
    rrule = p.parsed.parts
      .map((part) => (part.name === 'COUNT' ? `COUNT=${p.parsed.count! - spent}` : part.raw))
      .join(';');
  }
  const { recurrence_id: _, ...times } = occurrence;
  return {
    kind: 'split',
    ending,
    following: { times, rrule, exdates: series.exdates.filter((d) => d.getTime() >= at) },
  };
}
