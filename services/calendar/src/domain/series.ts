import { errors } from '@workauto/grpc';
import type { EventFields, EventRow } from '../repo/events.js';
import { recurrence } from './errors.js';
import { applied, derived, seriesOf, type Changes, type Timing } from './event-state.js';
import { expandOccurrences, type Occurrence, type SeriesSplit } from './recurrence.js';

/**
 * The rows a scoped change of a series writes (docs/calendar.md): the master ended before an
 * occurrence, the new master that carries the series on from it, one occurrence made an
 * exception or removed. Pure: the handlers lock, write and announce them.
 */

type Split = Extract<SeriesSplit, { kind: 'split' }>;

/** A new series' or single event's iCalendar UID (exceptions carry their master's). */
export const icalUid = (id: string) => `${id}@workauto`;

function timingOf(r: EventRow): Timing {
  return {
    is_all_day: r.is_all_day,
    start_at: r.start_at,
    end_at: r.end_at,
    start_date: r.start_date,
    end_date: r.end_date,
    timezone: r.timezone,
    rrule: r.rrule,
    exdates: r.exdates,
  };
}

/** The master with its timing changed as given, its span recomputed. */
function retimed(master: EventRow, change: Partial<Timing>): EventRow {
  const timing = { ...timingOf(master), ...change };
  return { ...master, ...timing, ...derived(timing) };
}

/** The master whose rule ends before the split occurrence (this_and_following). */
export const endedSeries = (master: EventRow, split: Split): EventRow =>
  retimed(master, { rrule: split.ending.rrule, exdates: split.ending.exdates });

/** The master without the occurrence that starts (originally) at `rid` (`this` on a DELETE). */
export const withoutOccurrence = (master: EventRow, rid: Date): EventRow =>
  retimed(master, { exdates: [...master.exdates, rid] });

/** The new master `id` that carries the series on from the split occurrence, with the request's changes. */
export function followingSeries(master: EventRow, split: Split, id: string, c: Changes): EventRow {
  const times = split.following.times;
  const timing: Timing = {
    ...timingOf(master),
    ...times,
    ...(times.is_all_day ? { start_at: null, end_at: null } : { start_date: null, end_date: null }),
    rrule: split.following.rrule,
    exdates: split.following.exdates,
  };
  return applied(
    { ...master, ...timing, ...derived(timing), id, ical_uid: icalUid(id), sequence: master.sequence + 1 },
    c,
  );
}

/** The occurrence of a master that starts (originally) at `rid`. */
export function occurrenceAt(master: EventRow, rid: Date): Occurrence {
  // The window [rid - 1 ms, rid + 1 ms) holds it, zero-length or not.
  const found = recurrence(() =>
    expandOccurrences(seriesOf(master), { from: new Date(rid.getTime() - 1), to: new Date(rid.getTime() + 1) }),
  ).find((o) => o.recurrence_id.getTime() === rid.getTime());
  if (!found) throw errors.invalidField('recurrence_id', 'is not the original start of an occurrence of this series');
  return found;
}

/** A new exception's row: the master's fields with the occurrence's times, no rule. */
export function exceptionOf(master: EventRow, o: Occurrence): EventFields {
  const times = o.is_all_day
    ? { is_all_day: true, start_date: o.start_date, end_date: o.end_date, start_at: null, end_at: null }
    : { is_all_day: false, start_at: o.start_at, end_at: o.end_at, start_date: null, end_date: null };
  const timing = { ...times, timezone: master.timezone, rrule: null, exdates: [] };
  const { created_at: _c, updated_at: _u, deleted_at: _d, ...fields } = master;
  return { ...fields, ...timing, ...derived(timing), series_id: master.id, recurrence_id: o.recurrence_id };
}
