import { newId, type PoolClient } from '@workauto/db';
import { changedFields, errors, type CallContext } from '@workauto/grpc';
import type { CalendarEvent } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { recurrence } from '../../domain/errors.js';
import { applied, hasDescriptive, movesSeries, seriesOf, type Changes } from '../../domain/event-state.js';
import { isOccurrence, splitSeries } from '../../domain/recurrence.js';
import { endedSeries, exceptionOf, followingSeries, occurrenceAt } from '../../domain/series.js';
import * as events from '../../repo/events.js';
import type { EventRow } from '../../repo/events.js';
import { emit, remove, save, view, type EventDeps } from './common.js';

/** One PUT's change of one event: what the edits below share. */
export interface Edit {
  deps: EventDeps;
  tx: PoolClient;
  ctx: CallContext;
  c: Changes;
  /** calendar_event.updated's metadata: the fields the request changes. */
  metadata: Record<string, unknown>;
}

/** The row with the change applied, saved, as the API returns it. */
export async function editRow(e: Edit, row: EventRow): Promise<CalendarEvent> {
  return view(e.deps, e.tx, e.ctx.tenant, await save(e.deps, e.tx, e.ctx, row, applied(row, e.c), e.metadata));
}

/**
 * `all` on a master: the master changes; carried descriptive fields reach its exceptions;
 * exceptions the new rule no longer has go.
 */
export async function editSeries(e: Edit, master: EventRow): Promise<CalendarEvent> {
  const { deps, tx, ctx, c } = e;
  const exceptions = await events.exceptionsOf(tx, ctx.tenant, master.id, 'update');
  const updated = await save(deps, tx, ctx, master, applied(master, c), e.metadata);
  const orphans: string[] = [];
  for (const ex of exceptions) {
    if (movesSeries(c) && !(updated.rrule && recurrence(() => isOccurrence(seriesOf(updated), ex.recurrence_id!))))
      orphans.push(ex.id);
    else if (hasDescriptive(c)) await save(deps, tx, ctx, ex, applied(ex, c, false), changedFields(c.descriptive));
  }
  await remove(deps, tx, ctx, orphans, { reason: 'its occurrence is no longer in the series' });
  return view(deps, tx, ctx.tenant, updated);
}

/** `this` on the occurrence `rid` of a master: its exception changes, or is made from the occurrence. */
export async function editOccurrence(e: Edit, master: EventRow, rid: Date): Promise<CalendarEvent> {
  const { deps, tx, ctx, c } = e;
  if (c.timing.rrule !== undefined || c.timing.exdates !== undefined) {
    throw errors.invalidField(
      c.timing.rrule !== undefined ? 'rrule' : 'exdates',
      'update_scope this changes one occurrence, which has no rule: use this_and_following or all',
    );
  }
  const existing = (await events.exceptionsOf(tx, ctx.tenant, master.id, 'update')).find(
    (x) => x.recurrence_id!.getTime() === rid.getTime(),
  );
  if (existing) return editRow(e, existing);
  const occurrence = occurrenceAt(master, rid);
  const row = await events.insertEvent(
    tx,
    applied({ ...exceptionOf(master, occurrence), id: newId(), sequence: master.sequence + 1 }, c),
  );
  return emit(deps, tx, ctx, 'calendar_event.created', row, { series_id: master.id, recurrence_id: rid });
}

/**
 * `this_and_following` from the occurrence `rid`: the master's rule ends before it and a new
 * master, with the change, carries the series on (at the first occurrence it is `all`). The
 * exceptions from `rid` on move to the new master; those its rule no longer has go.
 */
export async function editFollowing(e: Edit, master: EventRow, rid: Date): Promise<CalendarEvent> {
  const { deps, tx, ctx, c } = e;
  const split = recurrence(() => splitSeries(seriesOf(master), rid));
  if (split.kind === 'whole_series') return editSeries(e, master);
  const exceptions = await events.exceptionsOf(tx, ctx.tenant, master.id, 'update');
  await save(deps, tx, ctx, master, endedSeries(master, split), { rrule: split.ending.rrule, split_at: rid });
  const created = await events.insertEvent(tx, followingSeries(master, split, newId(), c));
  await emit(deps, tx, ctx, 'calendar_event.created', created, { split_from: master.id, recurrence_id: rid });
  const orphans: string[] = [];
  for (const ex of exceptions) {
    if (ex.recurrence_id!.getTime() < rid.getTime()) continue;
    if (movesSeries(c) && !recurrence(() => isOccurrence(seriesOf(created), ex.recurrence_id!))) {
      orphans.push(ex.id);
      continue;
    }
    await save(
      deps,
      tx,
      ctx,
      ex,
      { ...applied(ex, c, false), series_id: created.id, ical_uid: created.ical_uid },
      { ...changedFields(c.descriptive), series_id: created.id },
    );
  }
  await remove(deps, tx, ctx, orphans, { reason: 'its occurrence is no longer in the series' });
  return view(deps, tx, ctx.tenant, created);
}
