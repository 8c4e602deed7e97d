import type { PoolClient } from '@workauto/db';
import { errors, type CallContext } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { CalendarEvent } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { recurrence } from '../../domain/errors.js';
import { nextOccurrenceOf, seriesOf } from '../../domain/event-state.js';
import { RecurrenceError, isOccurrence } from '../../domain/recurrence.js';
import * as events from '../../repo/events.js';
import type { EventFields, EventRow } from '../../repo/events.js';
import { SOURCE, eventData, toEvent, type CalendarDeps } from '../common.js';

// What the event handlers share: the API view of a row, the writes that announce themselves, the
// locks a change of a series takes.

export type Scope = 'this' | 'this_and_following' | 'all';
/** The event handlers' deps, with the clock set. */
export type EventDeps = CalendarDeps & { now: () => Date };

export const lower = (id: string) => id.toLowerCase();

/**
 * next_occurrence of a master; null, with a log line, for a stored series the engine refuses to
 * evaluate (its rule is denser than the engine's caps): reading it must not fail.
 */
export function nextOf(
  { logger }: EventDeps,
  row: EventRow,
  exceptions: { recurrence_id: Date; span_start: Date }[],
  at: Date,
): Date | null {
  try {
    return nextOccurrenceOf(row, exceptions, at);
  } catch (err) {
    if (!(err instanceof RecurrenceError)) throw err;
    logger.warn(
      { tenant_id: row.tenant_id, event_id: row.id, rrule: row.rrule, reason: err.message },
      'next_occurrence of a stored series cannot be computed; it is null',
    );
    return null;
  }
}

/** The API view of a stored row: next_occurrence computed now, from the master and its exceptions. */
export async function view(
  deps: EventDeps,
  db: PoolClient | EventDeps['pool'],
  tenantId: string,
  row: EventRow,
): Promise<CalendarEvent> {
  if (!row.rrule || row.deleted_at) return toEvent(row);
  const exceptions = await events.exceptionStarts(db, tenantId, [row.id]);
  return toEvent(row, { next_occurrence: nextOf(deps, row, exceptions, deps.now()) });
}

/** Records a calendar_event.* event of the row; returns the row's API view. */
export async function emit(
  deps: EventDeps,
  tx: PoolClient,
  ctx: CallContext,
  type: string,
  row: EventRow,
  metadata?: Record<string, unknown>,
): Promise<CalendarEvent> {
  const event = await view(deps, tx, ctx.tenant, row);
  await recordEvent(tx, SOURCE, ctx, {
    type,
    resourceType: 'calendar_event',
    resourceId: row.id,
    parent: { type: 'calendar', id: row.calendar_id },
    data: eventData(event),
    ...(metadata ? { metadata } : {}),
  });
  return event;
}

/** Updates a row to `next` (sequence + 1) and records calendar_event.updated. */
export async function save(
  deps: EventDeps,
  tx: PoolClient,
  ctx: CallContext,
  current: EventRow,
  next: EventFields,
  metadata: Record<string, unknown>,
): Promise<EventRow> {
  const { id: _id, tenant_id: _t, ...fields } = next;
  const row = await events.updateEvent(tx, ctx.tenant, current.id, { ...fields, sequence: current.sequence + 1 });
  await emit(deps, tx, ctx, 'calendar_event.updated', row, metadata);
  return row;
}

/** Soft-deletes the events and records calendar_event.deleted for each. */
export async function remove(
  deps: EventDeps,
  tx: PoolClient,
  ctx: CallContext,
  ids: string[],
  metadata: Record<string, unknown>,
): Promise<void> {
  for (const row of await events.softDeleteEvents(tx, ctx.tenant, ids)) {
    await emit(deps, tx, ctx, 'calendar_event.deleted', row, { deleted_at: row.deleted_at, ...metadata });
  }
}

/**
 * The event a request addresses, locked parent first: a master before its exceptions. For an
 * exception, its master is locked first and the exception re-read.
 */
export async function lockTarget(
  tx: PoolClient,
  tenantId: string,
  id: string,
): Promise<{ event: EventRow; master?: EventRow }> {
  const found = await events.findEvent(tx, tenantId, id);
  if (!found) throw errors.notFound('event', id);
  const masterId = found.series_id ?? (found.rrule ? found.id : undefined);
  if (!masterId) {
    const event = await events.findEvent(tx, tenantId, id, 'update');
    if (!event) throw errors.notFound('event', id);
    return { event };
  }
  let master = await events.findEvent(tx, tenantId, masterId, 'update');
  const event = found.series_id ? await events.findEvent(tx, tenantId, id, 'update') : master;
  // A split that committed between the first read and the locks moved the exception to the new
  // master: lock that one too (it is newer than any lock order a request on it could hold against ours).
  if (event?.series_id && event.series_id !== master?.id)
    master = await events.findEvent(tx, tenantId, event.series_id, 'update');
  if (!master || !event) throw errors.notFound('event', id);
  return { event, master };
}

/** The recurrence_id a scoped change of a master needs: an occurrence of the series. */
export function occurrenceId(master: EventRow, recurrenceId: Date | undefined, scope: Scope): Date {
  if (!recurrenceId)
    throw errors.invalidField(
      'recurrence_id',
      `is required with update_scope ${scope}: the original start of the occurrence (recurrence_id of a listed occurrence)`,
    );
  if (!recurrence(() => isOccurrence(seriesOf(master), recurrenceId))) {
    throw errors.invalidField(
      'recurrence_id',
      'is not the original start of an occurrence of this series: use the recurrence_id of a listed occurrence',
    );
  }
  return recurrenceId;
}
