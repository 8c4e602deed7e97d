import { RecurrenceError, expandOccurrences, type Occurrence, type Series } from './recurrence.js';

/**
 * GET /events: the occurrences of a window from the stored rows, in one order and paged exactly.
 * Pure: the handler gives the rows the repo found and gets the page back.
 */

/** Where an occurrence sorts: its start instant, then the event id, then its recurrence id. */
export interface OccurrenceKey {
  start: Date;
  id: string;
  /** Original start of a series occurrence or exception; null for a single event. */
  recurrenceId: Date | null;
}

/** What a listing returns for one occurrence: the stored row and, for a series occurrence, its own times. */
export interface Listed<R> {
  row: R;
  key: OccurrenceKey;
  /** Set for occurrences expanded from a master (the row is the master). */
  occurrence?: Occurrence;
}

/** The fields of a stored event a listing reads. */
export interface ListableRow {
  id: string;
  series_id: string | null;
  recurrence_id: Date | null;
  rrule: string | null;
  span_start: Date;
}

function compareKeys(a: OccurrenceKey, b: OccurrenceKey): number {
  return (
    a.start.getTime() - b.start.getTime() ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) ||
    (a.recurrenceId?.getTime() ?? -Infinity) - (b.recurrenceId?.getTime() ?? -Infinity)
  );
}

/** Opaque to clients: base64url of the JSON `["o", start, id, recurrence id or ""]`. */
export function encodeOccurrenceCursor(k: OccurrenceKey): string {
  return Buffer.from(JSON.stringify(['o', k.start.toISOString(), k.id, k.recurrenceId?.toISOString() ?? ''])).toString(
    'base64url',
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** The cursor encodeOccurrenceCursor wrote, or undefined for anything else. */
export function decodeOccurrenceCursor(text: string): OccurrenceKey | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || v.length !== 4 || v[0] !== 'o') return undefined;
    const [, start, id, rid] = v as unknown[];
    if (
      typeof start !== 'string' ||
      !ISO.test(start) ||
      typeof id !== 'string' ||
      !UUID.test(id) ||
      typeof rid !== 'string' ||
      (rid !== '' && !ISO.test(rid))
    )
      return undefined;
    const key = { start: new Date(start), id, recurrenceId: rid === '' ? null : new Date(rid) };
    return Number.isNaN(key.start.getTime()) || (key.recurrenceId && Number.isNaN(key.recurrenceId.getTime()))
      ? undefined
      : key;
  } catch {
    return undefined;
  }
}

/**
 * The occurrences of masters in [from, to) after `after` that `include` accepts, those an exception
 * replaces (`<master id>/<epoch ms>` in `replaced`) left out. Unsorted. A master the engine refuses
 * to expand over the window (a stored rule denser than its caps) is left out and passed to
 * `refused`: one series never fails the listing of the others.
 */
export function expandedAfter<R extends ListableRow>(
  masters: R[],
  seriesOf: (row: R) => Series,
  replaced: ReadonlySet<string>,
  window: { from: Date; to: Date },
  after: OccurrenceKey | undefined,
  include: (row: R, occurrence: Occurrence) => boolean,
  refused: (row: R, err: RecurrenceError) => void,
): Listed<R>[] {
  const out: Listed<R>[] = [];
  for (const row of masters) {
    let occurrences: Occurrence[];
    try {
      occurrences = expandOccurrences(seriesOf(row), window);
    } catch (err) {
      if (!(err instanceof RecurrenceError)) throw err;
      refused(row, err);
      continue;
    }
    for (const occurrence of occurrences) {
      if (replaced.has(`${row.id}/${occurrence.recurrence_id.getTime()}`) || !include(row, occurrence)) continue;
      const key = { start: occurrence.recurrence_id, id: row.id, recurrenceId: occurrence.recurrence_id };
      if (!after || compareKeys(key, after) > 0) out.push({ row, key, occurrence });
    }
  }
  return out;
}

/** The first `size` items in key order, and the key to continue after when more follow. */
export function pageOf<R>(items: Listed<R>[], size: number): { items: Listed<R>[]; next?: OccurrenceKey } {
  const sorted = [...items].sort((a, b) => compareKeys(a.key, b.key));
  const kept = sorted.slice(0, size);
  return sorted.length > size ? { items: kept, next: kept[kept.length - 1]!.key } : { items: kept };
}
