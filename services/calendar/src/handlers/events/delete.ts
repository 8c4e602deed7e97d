import { withTransaction } from '@workauto/db';
import { errors, type CallContext } from '@workauto/grpc';
import type { PoolClient } from '@workauto/db';
import type { DeleteEventRequest } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { recurrence } from '../../domain/errors.js';
import { seriesOf } from '../../domain/event-state.js';
import { splitSeries } from '../../domain/recurrence.js';
import { endedSeries, withoutOccurrence } from '../../domain/series.js';
import { reindex, reindexOccurrence } from '../../occurrence-index.js';
import * as events from '../../repo/events.js';
import type { EventRow } from '../../repo/events.js';
import { LIMITS, scopes, type Handler } from '../common.js';
import { lockTarget, lower, occurrenceId, remove, save, type EventDeps, type Scope } from './common.js';

export function deleteEvent(deps: EventDeps): Handler<'deleteEvent'> {
  const { pool, now } = deps;
  return async (req, ctx) => {
    await withTransaction(
      pool,
      async (tx) => {
        const { event, master } = await lockTarget(tx, ctx.tenant, lower(req.id));
        const oneOccurrence = await removeInScope(deps, tx, ctx, req, event, master);
        if (master && oneOccurrence) await reindexOccurrence(tx, ctx.tenant, master.id, oneOccurrence);
        else await reindex(tx, ctx.tenant, [master?.id ?? event.id], now());
      },
      { signal: ctx.signal },
    );
    return {};
  };
}

/** Deletes what the scope says; returns the occurrence when only it changed (`this`). */
async function removeInScope(
  deps: EventDeps,
  tx: PoolClient,
  ctx: CallContext,
  req: DeleteEventRequest,
  event: EventRow,
  master: EventRow | undefined,
): Promise<Date | undefined> {
  if (!master) {
    await remove(deps, tx, ctx, [event.id], {});
    return undefined;
  }
  const exceptions = await events.exceptionsOf(tx, ctx.tenant, master.id, 'update');
  const given = scopes.toDomain(req.update_scope) as Scope | undefined;
  const scope: Scope = given ?? (event.series_id ? 'this' : 'all');
  if (scope === 'all') {
    await remove(deps, tx, ctx, [master.id, ...exceptions.map((e) => e.id)], {});
    return undefined;
  }
  const rid = event.series_id ? event.recurrence_id! : occurrenceId(master, req.recurrence_id, scope);
  if (scope === 'this') {
    if (master.exdates.length >= LIMITS.exdates)
      throw errors.failedPrecondition(
        'TOO_MANY_EXDATES',
        `the series has ${LIMITS.exdates} exdates already: end it (this_and_following) and start a new one`,
      );
    const without = withoutOccurrence(master, rid);
    await save(deps, tx, ctx, master, without, { exdates: without.exdates });
    await remove(
      deps,
      tx,
      ctx,
      exceptions.filter((e) => e.recurrence_id!.getTime() === rid.getTime()).map((e) => e.id),
      { series_id: master.id },
    );
    return rid;
  }
  const split = recurrence(() => splitSeries(seriesOf(master), rid));
  if (split.kind === 'whole_series') {
    await remove(deps, tx, ctx, [master.id, ...exceptions.map((e) => e.id)], {});
    return undefined;
  }
  await save(deps, tx, ctx, master, endedSeries(master, split), { rrule: split.ending.rrule, ended_before: rid });
  await remove(
    deps,
    tx,
    ctx,
    exceptions.filter((e) => e.recurrence_id!.getTime() >= rid.getTime()).map((e) => e.id),
    { series_id: master.id },
  );
  return undefined;
}
