import { MAX_WINDOW_DAYS, RecurrenceError, expandOccurrences, type Occurrence, type Series } from './recurrence.js';

/**
 * Which occurrences of a series the `occurrences` table holds (docs/calendar.md): those starting
 * from a year ago (or the series' start) to 400 days ahead (or its end), at most 2,000. Listings
 * read them with one indexed query; occurrences outside the range are expanded on read.
 */
const INDEX_LOOKBACK_DAYS = 366;
export const INDEX_HORIZON_DAYS = 400;
const INDEX_MAX_PER_SERIES = 2_000;
/** The index is moved forward when less than this is left ahead of now. */
export const INDEX_REFRESH_DAYS = 30;
/** "To the series' end": the index of a series that ends holds all its occurrences from indexed_from. */
export const INDEXED_TO_END = new Date('9999-12-31T00:00:00Z');

const DAY_MS = 86_400_000;

export interface SeriesIndex {
  occurrences: Occurrence[];
  /** Occurrences starting in [from, until) are indexed. */
  from: Date;
  until: Date;
  /** Stopped short of the horizon (INDEX_MAX_PER_SERIES, or a stretch the engine refuses): a dense series. */
  capped: boolean;
}

/**
 * The occurrences of a series to index at `now`: `start` is its first start, `end` the end of its
 * last occurrence (null: no end). A series too dense to index a year back and 400 days ahead within
 * the cap (hourly, minutely) is indexed from now instead, so current windows are served from the
 * index. A stretch the engine refuses to expand (a rule too dense for its caps) ends the index
 * there; listings of it are refused on read as before.
 */
export function seriesIndex(series: Series, start: Date, end: Date | null, now: Date): SeriesIndex {
  const back = new Date(Math.max(start.getTime(), now.getTime() - INDEX_LOOKBACK_DAYS * DAY_MS));
  const index = indexFrom(series, back, end, now);
  return index.capped && index.until.getTime() <= now.getTime()
    ? indexFrom(series, new Date(Math.max(start.getTime(), now.getTime())), end, now)
    : index;
}

function indexFrom(series: Series, from: Date, end: Date | null, now: Date): SeriesIndex {
  const horizon = now.getTime() + INDEX_HORIZON_DAYS * DAY_MS;
  const last = end && end.getTime() <= horizon ? end.getTime() : horizon;
  const occurrences: Occurrence[] = [];
  // Chunks a day shorter than the engine's window cap, which the 1 ms of slack below must not exceed.
  const chunk = (MAX_WINDOW_DAYS - 1) * DAY_MS;
  for (let at = from.getTime(); at < last; at += chunk) {
    const chunkEnd = Math.min(at + chunk, last);
    let found: Occurrence[];
    try {
      // From 1 ms before: a zero-length occurrence at `at` overlaps the window too.
      found = expandOccurrences(series, { from: new Date(at - 1), to: new Date(chunkEnd) });
    } catch (err) {
      if (err instanceof RecurrenceError) return { occurrences, from, until: new Date(at), capped: true };
      throw err;
    }
    for (const o of found) {
      if (o.recurrence_id.getTime() < at) continue;
      if (occurrences.length === INDEX_MAX_PER_SERIES)
        return { occurrences, from, until: o.recurrence_id, capped: true };
      occurrences.push(o);
    }
  }
  return { occurrences, from, until: last === horizon ? new Date(horizon) : INDEXED_TO_END, capped: false };
}
