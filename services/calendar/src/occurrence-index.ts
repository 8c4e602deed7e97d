import type { PoolClient } from '@workauto/db';
import { recurrence } from './domain/errors.js';
import { seriesOf } from './domain/event-state.js';
import { seriesIndex } from './domain/occurrence-index.js';
import { expandOccurrences, startOfDay, type Occurrence } from './domain/recurrence.js';
import * as events from './repo/events.js';
import type { EventRow, IndexEntry } from './repo/events.js';

/**
 * Keeps the occurrence index (docs/calendar.md) in step with the events, in the transaction of each
 * change; the index extender (index-extender.ts) moves it forward as time passes.
 */

/** The index row of a single event or an exception. */
function entryOf(row: EventRow): IndexEntry {
  return {
    tenant_id: row.tenant_id,
    calendar_id: row.calendar_id,
    event_id: row.id,
    recurrence_id: row.recurrence_id,
    sort_start: row.span_start,
    sort_end: row.span_end!,
    start_at: row.start_at,
    end_at: row.end_at,
    start_date: row.start_date,
    end_date: row.end_date,
  };
}

/** The index row of a master's occurrence. */
function occurrenceEntry(master: EventRow, o: Occurrence): IndexEntry {
  const base = {
    tenant_id: master.tenant_id,
    calendar_id: master.calendar_id,
    event_id: master.id,
    recurrence_id: o.recurrence_id,
    sort_start: o.recurrence_id,
  };
  return o.is_all_day
    ? {
        ...base,
        sort_end: startOfDay(o.end_date, master.timezone),
        start_at: null,
        end_at: null,
        start_date: o.start_date,
        end_date: o.end_date,
      }
    : { ...base, sort_end: o.end_at, start_at: o.start_at, end_at: o.end_at, start_date: null, end_date: null };
}

/** A listed occurrence of a master, from its index row. */
export function indexedOccurrence(master: EventRow, e: events.IndexedRow['entry']): Occurrence {
  return master.is_all_day
    ? { is_all_day: true, start_date: e.start_date!, end_date: e.end_date!, recurrence_id: e.recurrence_id! }
    : { is_all_day: false, start_at: e.start_at!, end_at: e.end_at!, recurrence_id: e.recurrence_id! };
}

/**
 * Rebuilds the index rows of single events and of whole series (a master id: the master's
 * occurrences and its exceptions), in the transaction of the change. Pass the master's id for any
 * change of a series or one of its exceptions; a deleted event's rows just go.
 */
export async function reindex(tx: PoolClient, tenantId: string, ids: string[], now: Date): Promise<void> {
  await events.deleteIndex(tx, tenantId, ids);
  const entries: IndexEntry[] = [];
  for (const id of new Set(ids)) {
    const row = await events.findEvent(tx, tenantId, id);
    if (!row) continue;
    if (!row.rrule) {
      entries.push(entryOf(row));
      continue;
    }
    const exceptions = await events.liveExceptions(tx, tenantId, [row.id]);
    entries.push(...exceptions.map(entryOf));
    const replaced = new Set(exceptions.map((e) => e.recurrence_id!.getTime()));
    const index = recurrence(() => seriesIndex(seriesOf(row), row.span_start, row.span_end, now));
    for (const o of index.occurrences)
      if (!replaced.has(o.recurrence_id.getTime())) entries.push(occurrenceEntry(row, o));
    await events.setIndexedRange(tx, tenantId, row.id, index);
  }
  await events.insertIndex(tx, entries);
}

/**
 * Re-indexes one occurrence of a series after a change that touches only it (`this`: an exception
 * made, changed or removed, an exdate added): its exception's row, or else the master's occurrence
 * if the series still has it and the master's index covers it. The rest of the series is unchanged.
 */
export async function reindexOccurrence(
  tx: PoolClient,
  tenantId: string,
  masterId: string,
  recurrenceId: Date,
): Promise<void> {
  await events.deleteOccurrenceIndex(tx, tenantId, masterId, recurrenceId);
  const master = await events.findEvent(tx, tenantId, masterId);
  if (!master?.rrule) return;
  const exception = await events.exceptionAt(tx, tenantId, masterId, recurrenceId);
  if (exception) return events.insertIndex(tx, [entryOf(exception)]);
  const at = recurrenceId.getTime();
  if (
    !master.indexed_from ||
    !master.indexed_until ||
    at < master.indexed_from.getTime() ||
    at >= master.indexed_until.getTime()
  )
    return;
  const o = recurrence(() =>
    expandOccurrences(seriesOf(master), { from: new Date(at - 1), to: new Date(at + 1) }),
  ).find((x) => x.recurrence_id.getTime() === at);
  if (o) await events.insertIndex(tx, [occurrenceEntry(master, o)]);
}
