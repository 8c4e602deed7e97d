import { errors, parsePage, toPage, validate } from '@workauto/grpc';
import { recurrence } from '../../domain/errors.js';
import { seriesOf } from '../../domain/event-state.js';
import {
  decodeOccurrenceCursor,
  encodeOccurrenceCursor,
  expandedAfter,
  pageOf,
  type Listed,
} from '../../domain/listing.js';
import { INDEXED_TO_END } from '../../domain/occurrence-index.js';
import { checkWindow, type Occurrence } from '../../domain/recurrence.js';
import { indexedOccurrence } from '../../occurrence-index.js';
import * as calendars from '../../repo/calendars.js';
import * as events from '../../repo/events.js';
import type { EventRow } from '../../repo/events.js';
import { toEvent, type Handler } from '../common.js';
import { lower, nextOf, type EventDeps } from './common.js';

export function listEvents(deps: EventDeps): Handler<'listEvents'> {
  const { pool, logger } = deps;
  return async (req, ctx) => {
    const v = validate();
    if (!req.from) v.add('from', 'is required: the start of the window (RFC 3339)');
    if (!req.to) v.add('to', 'is required: the end of the window (RFC 3339), at most 366 days after from');
    v.done();
    const page = parsePage(req, decodeOccurrenceCursor);
    const from = req.from!;
    const to = req.to!;
    recurrence(() => checkWindow(from, to));
    const calendarId = req.calendar_id ? lower(req.calendar_id) : undefined;
    if (calendarId && !(await calendars.findCalendar(pool, ctx.tenant, calendarId)))
      throw errors.notFound('calendar', calendarId);
    const window = { from, to };
    // The indexed occurrences (one keyset query), and those of the few masters whose index does not cover the window.
    const indexed = await events.indexedPage(pool, ctx.tenant, calendarId, window, page.after, page.size + 1);
    const items: Listed<EventRow>[] = indexed.map(({ event, entry }) => ({
      row: event,
      key: { start: entry.sort_start, id: event.id, recurrenceId: entry.recurrence_id },
      ...(event.rrule ? { occurrence: indexedOccurrence(event, entry) } : {}),
    }));
    const unindexed = await events.unindexedMasters(pool, ctx.tenant, calendarId, from, to);
    if (unindexed.length) {
      const longest = Math.max(0, ...unindexed.map(durationMs));
      const replaced = await events.replacedOccurrences(
        pool,
        ctx.tenant,
        unindexed.map((m) => m.id),
        new Date(from.getTime() - longest),
        to,
      );
      // A master without index rows (none were ever written for it) is expanded whole.
      const outside = (m: EventRow, o: Occurrence) =>
        !m.indexed_from ||
        !m.indexed_until ||
        o.recurrence_id.getTime() < m.indexed_from.getTime() ||
        o.recurrence_id.getTime() >= m.indexed_until.getTime();
      items.push(
        ...expandedAfter(
          unindexed,
          (r) => seriesOf(r),
          new Set(replaced.map((r) => `${r.series_id}/${r.recurrence_id.getTime()}`)),
          window,
          page.after,
          outside,
          (m, err) =>
            logger.warn(
              {
                tenant_id: ctx.tenant,
                event_id: m.id,
                rrule: m.rrule,
                reason: err.message,
                request_id: ctx.requestId,
              },
              'a stored series cannot be expanded over this window; its occurrences outside the index are left out of the listing (change its rrule to fix it)',
            ),
        ),
      );
    }
    const listed = pageOf(items, page.size);
    // next_occurrence of the masters on this page.
    const pageMasters = new Map(listed.items.filter((i) => i.occurrence).map((i) => [i.row.id, i.row]));
    const next = await listedNextOccurrences(deps, [...pageMasters.values()], ctx.tenant);
    return toPage(
      { rows: listed.items, keys: listed.items.map((i) => i.key), ...(listed.next ? { next: listed.next } : {}) },
      (i) =>
        toEvent(i.row, {
          ...(i.occurrence ? { occurrence: i.occurrence, next_occurrence: next.get(i.row.id) ?? null } : {}),
        }),
      encodeOccurrenceCursor,
    );
  };
}

/**
 * next_occurrence of listed masters, from the occurrence index (one query) where it covers now
 * and what follows; from the recurrence engine otherwise.
 */
async function listedNextOccurrences(
  deps: EventDeps,
  masters: EventRow[],
  tenantId: string,
): Promise<Map<string, Date | null>> {
  const { pool } = deps;
  const at = deps.now();
  const indexed = await events.nextStarts(
    pool,
    tenantId,
    masters.map((m) => m.id),
    at,
  );
  const out = new Map<string, Date | null>();
  for (const m of masters) {
    const n = indexed.get(m.id);
    const covered =
      n &&
      m.indexed_from &&
      m.indexed_until &&
      m.indexed_from.getTime() <= at.getTime() &&
      (n.occurrence || m.indexed_until.getTime() >= INDEXED_TO_END.getTime());
    if (covered) {
      const all = [n.occurrence, n.exception]
        .filter((x): x is Date => x !== null)
        .sort((a, b) => a.getTime() - b.getTime());
      out.set(m.id, all[0] ?? null);
    } else {
      out.set(m.id, nextOf(deps, m, await events.exceptionStarts(pool, tenantId, [m.id]), at));
    }
  }
  return out;
}

/** How long one occurrence of a master lasts (an all-day one: its dates plus a day of time zones either side). */
function durationMs(m: EventRow): number {
  return m.is_all_day
    ? Date.parse(m.end_date!) - Date.parse(m.start_date!) + 2 * 86_400_000
    : m.end_at!.getTime() - m.start_at!.getTime();
}
