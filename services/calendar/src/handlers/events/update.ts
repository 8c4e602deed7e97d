import { withTransaction } from '@workauto/db';
import { changedFields, errors, patchNulls, validate } from '@workauto/grpc';
import type { CalendarEvent, UpdateEventRequest } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { hasDescriptive, hasTiming } from '../../domain/event-state.js';
import { reindex, reindexOccurrence } from '../../occurrence-index.js';
import type { EventRow } from '../../repo/events.js';
import { scopes, type Handler } from '../common.js';
import { changesOf } from './changes.js';
import { lockTarget, lower, occurrenceId, view, type EventDeps, type Scope } from './common.js';
import { editFollowing, editOccurrence, editRow, editSeries, type Edit } from './series-edits.js';

/** Fields PUT clears with null ('' for the text ones). */
const TEXT_CLEARABLE = [
  'description',
  'location',
  'conference_url',
  'color',
  'organizer_id',
  'rrule',
  'start_date',
  'end_date',
] as const;
const OTHER_CLEARABLE = ['location_lat', 'location_lng', 'start_at', 'end_at', 'reminders', 'exdates'] as const;

export function updateEvent(deps: EventDeps): Handler<'updateEvent'> {
  const { pool, now } = deps;
  return async (req, ctx) => {
    const v = validate();
    const { req: r, cleared } = patchNulls(req, { text: TEXT_CLEARABLE, other: OTHER_CLEARABLE }, v);
    v.done();
    const mask = req.update_mask;
    const carried = (f: string) =>
      mask
        ? mask.includes(f)
        : f === 'reminders' || f === 'exdates'
          ? r[f].length > 0
          : (r as unknown as Record<string, unknown>)[f] !== undefined;
    const c = changesOf(r, carried, cleared);
    const metadata = { ...changedFields(c.descriptive), ...changedFields(c.timing) };
    const given = scopes.toDomain(req.update_scope) as Scope | undefined;
    return withTransaction(
      pool,
      async (tx) => {
        const { event, master } = await lockTarget(tx, ctx.tenant, lower(req.id));
        if (!hasDescriptive(c) && !hasTiming(c)) return view(deps, tx, ctx.tenant, event);
        const edit: Edit = { deps, tx, ctx, c, metadata };
        const { out, oneOccurrence } = await editInScope(edit, req, event, master, given);
        // The series (or the single event), and a new master of a split.
        if (master && oneOccurrence) await reindexOccurrence(tx, ctx.tenant, master.id, oneOccurrence);
        else
          await reindex(
            tx,
            ctx.tenant,
            [master?.id ?? event.id, ...(out.rrule && !out.series_id ? [out.id] : [])],
            now(),
          );
        return out;
      },
      { signal: ctx.signal },
    );
  };
}

/**
 * The edit the scope asks for, of the event the request names (its master locked too, when it
 * is part of a series). `oneOccurrence` is set when only that occurrence changed (`this`):
 * re-indexing it is enough.
 */
async function editInScope(
  e: Edit,
  req: UpdateEventRequest,
  event: EventRow,
  master: EventRow | undefined,
  given: Scope | undefined,
): Promise<{ out: CalendarEvent; oneOccurrence?: Date }> {
  // A single event: any scope edits it.
  if (!master) {
    if (req.recurrence_id)
      throw errors.invalidField(
        'recurrence_id',
        'is only for an occurrence of a recurring event; this event is a single event',
      );
    return { out: await editRow(e, event) };
  }
  // An exception's own id: `this` (its default) edits it; the wider scopes act on its series from its occurrence.
  if (event.series_id && (given ?? 'this') === 'this') {
    if (req.recurrence_id && req.recurrence_id.getTime() !== event.recurrence_id!.getTime()) {
      throw errors.invalidField(
        'recurrence_id',
        `does not match this exception's own recurrence_id (${event.recurrence_id!.toISOString()})`,
      );
    }
    if (e.c.timing.rrule !== undefined || e.c.timing.exdates !== undefined) {
      throw errors.invalidField(
        e.c.timing.rrule !== undefined ? 'rrule' : 'exdates',
        'an exception is one occurrence: change the series with update_scope all on the series',
      );
    }
    return { out: await editRow(e, event), oneOccurrence: event.recurrence_id! };
  }
  const scope: Scope = given ?? 'all';
  if (scope === 'all') return { out: await editSeries(e, master) };
  const rid = occurrenceId(master, event.series_id ? event.recurrence_id! : req.recurrence_id, scope);
  if (scope === 'this') return { out: await editOccurrence(e, master, rid), oneOccurrence: rid };
  return { out: await editFollowing(e, master, rid) };
}
