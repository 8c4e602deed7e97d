import { errors, isIsoDate } from '@workauto/grpc';
import type { EventFields, EventRow } from '../repo/events.js';
import { recurrence } from './errors.js';
import { checkSeries, nextOccurrence, seriesEnd, startOfDay, type Series } from './recurrence.js';

/**
 * An event's stored state and the changes a request carries, proto-independent: how a change
 * applies to a row (times resolved and checked, span recomputed), shared by create, PUT and DELETE.
 */

/** The master's series as the recurrence engine takes it. */
export function seriesOf(row: EventRow, extraExdates: readonly Date[] = []): Series {
  return {
    times: row.is_all_day
      ? { is_all_day: true, start_date: row.start_date!, end_date: row.end_date! }
      : { is_all_day: false, start_at: row.start_at!, end_at: row.end_at! },
    timezone: row.timezone,
    rrule: row.rrule!,
    exdates: extraExdates.length ? [...row.exdates, ...extraExdates] : row.exdates,
  };
}

/** When an event happens and how it repeats. */
export type Timing = Pick<
  EventRow,
  'is_all_day' | 'start_at' | 'end_at' | 'start_date' | 'end_date' | 'timezone' | 'rrule' | 'exdates'
>;

/** What an event is about: the fields an `all` edit also gives the series' exceptions. */
type Descriptive = Pick<
  EventRow,
  | 'title'
  | 'description'
  | 'location'
  | 'location_lat'
  | 'location_lng'
  | 'conference_url'
  | 'color'
  | 'event_type'
  | 'status'
  | 'availability'
  | 'visibility'
  | 'reminders'
  | 'metadata'
  | 'organizer_id'
>;

/** A request's changes: a value, null (cleared), or undefined (not carried). */
export interface Changes {
  descriptive: Partial<Descriptive>;
  timing: { [K in keyof Timing]?: Timing[K] | null };
}

export const hasDescriptive = (c: Changes) => Object.values<unknown>(c.descriptive).some((v) => v !== undefined);
export const hasTiming = (c: Changes) => Object.values<unknown>(c.timing).some((v) => v !== undefined);
/** Whether the change moves the series' occurrences (its start, length, zone or rule). */
export const movesSeries = (c: Changes) =>
  (['is_all_day', 'start_at', 'end_at', 'start_date', 'end_date', 'timezone', 'rrule'] as const).some(
    (k) => c.timing[k] !== undefined,
  );

/** The timing after a change, refused with a 400 naming the field when it does not describe an event. */
export function mergeTiming(base: Timing, c: Changes['timing']): Timing {
  const allDay = c.is_all_day ?? base.is_all_day;
  const given = <K extends keyof Timing>(k: K, fallback: Timing[K]): Timing[K] | null =>
    c[k] === undefined ? fallback : c[k];
  if (allDay) {
    if (c.start_at || c.end_at)
      throw errors.invalidField(
        c.start_at ? 'start_at' : 'end_at',
        'an all-day event has start_date and end_date (YYYY-MM-DD) instead: leave start_at and end_at out',
      );
  } else if (c.start_date || c.end_date) {
    throw errors.invalidField(
      c.start_date ? 'start_date' : 'end_date',
      'a timed event has start_at and end_at: set is_all_day to true for dates',
    );
  }
  const t: Timing = {
    is_all_day: allDay,
    start_at: allDay ? null : given('start_at', base.is_all_day ? null : base.start_at),
    end_at: allDay ? null : given('end_at', base.is_all_day ? null : base.end_at),
    start_date: allDay ? given('start_date', base.is_all_day ? base.start_date : null) : null,
    end_date: allDay ? given('end_date', base.is_all_day ? base.end_date : null) : null,
    timezone: given('timezone', base.timezone) ?? base.timezone, // a change never clears the zone (handlers/events/changes.ts)
    rrule: given('rrule', base.rrule) || null,
    exdates: [],
  };
  // A rule cleared takes its exdates with it.
  t.exdates = given('exdates', t.rrule ? base.exdates : []) ?? [];
  if (allDay) {
    for (const f of ['start_date', 'end_date'] as const) {
      if (!t[f])
        throw errors.invalidField(
          f,
          'is required for an all-day event (YYYY-MM-DD; end_date is exclusive: a one-day event ends the next day)',
        );
      if (!isIsoDate(t[f])) throw errors.invalidField(f, 'must be a date like 2026-12-31 (YYYY-MM-DD)');
    }
    if (t.end_date! <= t.start_date!)
      throw errors.invalidField(
        'end_date',
        'must be after start_date (it is exclusive: a one-day event ends the next day)',
      );
  } else {
    for (const f of ['start_at', 'end_at'] as const)
      if (!t[f]) throw errors.invalidField(f, 'is required (RFC 3339), or set is_all_day with start_date and end_date');
    if (t.end_at!.getTime() < t.start_at!.getTime()) throw errors.invalidField('end_at', 'must not be before start_at');
  }
  if (!t.rrule && t.exdates.length)
    throw errors.invalidField('exdates', 'only a recurring event (with an rrule) has exdates');
  return t;
}

/** The columns that follow from the timing: checked against the recurrence rules, and the span listings filter on. */
export function derived(t: Timing): Pick<EventRow, 'span_start' | 'span_end'> {
  return recurrence(() => {
    const start = t.is_all_day ? startOfDay(t.start_date!, t.timezone) : t.start_at!;
    if (!t.rrule)
      return { span_start: start, span_end: t.is_all_day ? startOfDay(t.end_date!, t.timezone) : t.end_at! };
    const series = seriesOf({ ...t, rrule: t.rrule } as EventRow);
    checkSeries(series);
    return { span_start: start, span_end: seriesEnd(series) };
  });
}

/** A row with the changes applied (timing only when `withTiming`), its span recomputed. */
export function applied<R extends EventFields>(row: R, c: Changes, withTiming = true): R {
  const described = { ...row, ...definedOf(c.descriptive) };
  if (!withTiming || !hasTiming(c)) return described;
  const timing = mergeTiming(row, c.timing);
  return { ...described, ...timing, ...derived(timing) };
}

function definedOf<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * next_occurrence: the first start after `now` of a series, exceptions taken into account (an
 * exception replaces its occurrence with its own start); null for other events and ended series.
 * Throws the engine's RecurrenceError for a stored rule it refuses to evaluate.
 */
export function nextOccurrenceOf(
  row: EventRow,
  exceptions: { recurrence_id: Date; span_start: Date }[],
  now: Date,
): Date | null {
  if (!row.rrule || row.series_id) return null;
  const fromRule = nextOccurrence(
    seriesOf(
      row,
      exceptions.map((e) => e.recurrence_id),
    ),
    now,
  );
  const moved = exceptions.map((e) => e.span_start).filter((s) => s.getTime() > now.getTime());
  const all = [...(fromRule ? [fromRule] : []), ...moved].sort((a, b) => a.getTime() - b.getTime());
  return all[0] ?? null;
}
