import { newId, withTransaction, type PoolClient } from '@workauto/db';
import {
  errors,
  parsePage,
  patchNulls,
  toPage,
  validate,
  changedFields,
  checkYears,
  textOrNull,
  type CallContext,
  type Handlers,
} from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type {
  CalendarEvent,
  CalendarServiceService,
  CreateEventRequest,
  Reminder,
  UpdateEventRequest,
} from '@workauto/protos/workauto/calendar/v1/calendar.js';
import {
  decodeOccurrenceCursor,
  encodeOccurrenceCursor,
  expandedAfter,
  pageOf,
  type Listed,
} from '../domain/listing.js';
import {
  RecurrenceError,
  canonicalTimezone,
  checkWindow,
  expandOccurrences,
  isOccurrence,
  splitSeries,
  type Occurrence,
} from '../domain/recurrence.js';
import * as calendars from '../repo/calendars.js';
import * as events from '../repo/events.js';
import type { EventFields, EventRow, ReminderRow } from '../repo/events.js';
import {
  LIMITS,
  SOURCE,
  availabilities,
  eventData,
  eventTypes,
  recurrence,
  reminderMethods,
  scopes,
  seriesOf,
  statuses,
  toEvent,
  visibilities,
  type CalendarDeps,
} from './common.js';
import {
  applied,
  hasDescriptive,
  hasTiming,
  mergeTiming,
  derived,
  movesSeries,
  nextOccurrenceOf,
  type Changes,
} from './event-state.js';
import { indexedOccurrence, reindex, reindexOccurrence } from './occurrence-index.js';
import { INDEXED_TO_END } from '../domain/occurrence-index.js';
import { checkEventFields } from './validation.js';

type H = Handlers<typeof CalendarServiceService>;
type Scope = 'this' | 'this_and_following' | 'all';

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

const reminderRows = (rs: Reminder[]): ReminderRow[] =>
  rs.map((r) => ({ method: reminderMethods.toDomain(r.method) as ReminderRow['method'], minutes: r.minutes }));
const lower = (id: string) => id.toLowerCase();

function timezoneOf(value: string | undefined): string | undefined {
  return value === undefined ? undefined : recurrence(() => canonicalTimezone(value));
}

/** The changes a create or PUT carries (`carried(f)`: the body has the key). */
function changesOf(
  req: CreateEventRequest | UpdateEventRequest,
  carried: (f: string) => boolean,
  cleared: ReadonlySet<string> = new Set(),
): Changes {
  // '' (and null, which patchNulls turns into '') clears a text field.
  const text = (v: string | undefined) => (v === undefined ? undefined : (textOrNull(v) ?? null));
  const num = (f: 'location_lat' | 'location_lng', v: number | undefined) => (cleared.has(f) ? null : v);
  const time = (f: 'start_at' | 'end_at', v: Date | undefined) => (cleared.has(f) ? null : v);
  const date = (v: string | undefined) => (v === undefined ? undefined : v === '' ? null : v);
  return {
    descriptive: {
      title: req.title === undefined ? undefined : req.title.trim(),
      description: text(req.description),
      location: text(req.location),
      location_lat: num('location_lat', req.location_lat),
      location_lng: num('location_lng', req.location_lng),
      conference_url: text(req.conference_url),
      color: text(req.color),
      organizer_id:
        req.organizer_id === undefined ? undefined : req.organizer_id === '' ? null : lower(req.organizer_id),
      event_type: eventTypes.toDomain(req.event_type),
      status: statuses.toDomain(req.status),
      availability: availabilities.toDomain(req.availability),
      visibility: visibilities.toDomain(req.visibility),
      reminders: carried('reminders') ? reminderRows(req.reminders) : undefined,
      metadata: req.metadata,
    },
    timing: {
      is_all_day: req.is_all_day,
      start_at: time('start_at', req.start_at),
      end_at: time('end_at', req.end_at),
      start_date: date(req.start_date),
      end_date: date(req.end_date),
      timezone: timezoneOf(req.timezone),
      rrule: req.rrule === undefined ? undefined : req.rrule === '' ? null : req.rrule,
      exdates: carried('exdates') ? req.exdates : undefined,
    },
  };
}

/** A new series' or single event's iCalendar UID (exceptions carry their master's). */
const icalUid = (id: string) => `${id}@workauto`;

export function eventHandlers({
  pool,
  logger,
  now = () => new Date(),
}: CalendarDeps): Pick<H, 'createEvent' | 'listEvents' | 'getEvent' | 'updateEvent' | 'deleteEvent'> {
  /**
   * next_occurrence of a master; null, with a log line, for a stored series the engine refuses to
   * evaluate (its rule is denser than the engine's caps): reading it must not fail.
   */
  function nextOf(row: EventRow, exceptions: { recurrence_id: Date; span_start: Date }[], at: Date): Date | null {
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
  async function view(db: PoolClient | typeof pool, tenantId: string, row: EventRow): Promise<CalendarEvent> {
    if (!row.rrule || row.deleted_at) return toEvent(row);
    const exceptions = await events.exceptionStarts(db, tenantId, [row.id]);
    return toEvent(row, { next_occurrence: nextOf(row, exceptions, now()) });
  }

  /**
   * next_occurrence of listed masters, from the occurrence index (one query) where it covers now
   * and what follows; from the recurrence engine otherwise.
   */
  async function listedNextOccurrences(masters: EventRow[], tenantId: string): Promise<Map<string, Date | null>> {
    const at = now();
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
        out.set(m.id, nextOf(m, await events.exceptionStarts(pool, tenantId, [m.id]), at));
      }
    }
    return out;
  }

  async function emit(
    tx: PoolClient,
    ctx: CallContext,
    type: string,
    row: EventRow,
    metadata?: Record<string, unknown>,
  ): Promise<CalendarEvent> {
    const event = await view(tx, ctx.tenant, row);
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
  async function save(
    tx: PoolClient,
    ctx: CallContext,
    current: EventRow,
    next: EventFields,
    metadata: Record<string, unknown>,
  ): Promise<EventRow> {
    const { id: _id, tenant_id: _t, ...fields } = next;
    const row = await events.updateEvent(tx, ctx.tenant, current.id, { ...fields, sequence: current.sequence + 1 });
    await emit(tx, ctx, 'calendar_event.updated', row, metadata);
    return row;
  }

  async function remove(
    tx: PoolClient,
    ctx: CallContext,
    ids: string[],
    metadata: Record<string, unknown>,
  ): Promise<void> {
    for (const row of await events.softDeleteEvents(tx, ctx.tenant, ids)) {
      await emit(tx, ctx, 'calendar_event.deleted', row, { deleted_at: row.deleted_at, ...metadata });
    }
  }

  /**
   * The event a request addresses, locked parent first: a master before its exceptions. For an
   * exception, its master is locked first and the exception re-read.
   */
  async function lockTarget(
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
  function occurrenceId(master: EventRow, recurrenceId: Date | undefined, scope: Scope): Date {
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

  /** `all` on a master: the master changes; carried descriptive fields reach its exceptions; exceptions the new rule no longer has go. */
  async function editSeries(
    tx: PoolClient,
    ctx: CallContext,
    master: EventRow,
    c: Changes,
    metadata: Record<string, unknown>,
  ): Promise<EventRow> {
    const exceptions = await events.exceptionsOf(tx, ctx.tenant, master.id, 'update');
    const updated = await save(tx, ctx, master, applied(master, c), metadata);
    const orphans: string[] = [];
    for (const ex of exceptions) {
      if (movesSeries(c) && !(updated.rrule && recurrence(() => isOccurrence(seriesOf(updated), ex.recurrence_id!))))
        orphans.push(ex.id);
      else if (hasDescriptive(c)) await save(tx, ctx, ex, applied(ex, c, false), changedFields(c.descriptive));
    }
    await remove(tx, ctx, orphans, { reason: 'its occurrence is no longer in the series' });
    return updated;
  }

  return {
    async createEvent(req, ctx) {
      const v = validate()
        .uuid('calendar_id', req.calendar_id, { required: true })
        .text('title', req.title, { required: true, max: LIMITS.title });
      checkEventFields(v, req, false).done();
      const c = changesOf(req, (f) =>
        f === 'reminders' || f === 'exdates' ? true : (req as unknown as Record<string, unknown>)[f] !== undefined,
      );
      if (c.timing.is_all_day === undefined)
        c.timing.is_all_day = req.start_date !== undefined && req.start_at === undefined;
      return withTransaction(
        pool,
        async (tx) => {
          const calendar = await calendars.findCalendar(tx, ctx.tenant, lower(req.calendar_id), 'share');
          if (!calendar) throw errors.notFound('calendar', req.calendar_id);
          const timing = mergeTiming(
            {
              is_all_day: false,
              start_at: null,
              end_at: null,
              start_date: null,
              end_date: null,
              timezone: calendar.timezone,
              rrule: null,
              exdates: [],
            },
            c.timing,
          );
          const id = newId();
          const d = c.descriptive;
          const row = await events.insertEvent(tx, {
            id,
            tenant_id: ctx.tenant,
            calendar_id: calendar.id,
            series_id: null,
            recurrence_id: null,
            title: d.title!,
            description: d.description ?? null,
            location: d.location ?? null,
            location_lat: d.location_lat ?? null,
            location_lng: d.location_lng ?? null,
            conference_url: d.conference_url ?? null,
            color: d.color ?? null,
            event_type: d.event_type ?? 'default',
            status: d.status ?? 'confirmed',
            availability: d.availability ?? 'busy',
            visibility: d.visibility ?? 'default',
            reminders: d.reminders ?? [],
            organizer_id: d.organizer_id ?? null,
            metadata: d.metadata ?? {},
            ...timing,
            ...derived(timing),
            ical_uid: icalUid(id),
            sequence: 0,
          });
          await reindex(tx, ctx.tenant, [row.id], now());
          return emit(tx, ctx, 'calendar_event.created', row);
        },
        { signal: ctx.signal },
      );
    },

    async listEvents(req, ctx) {
      const v = validate().uuid('calendar_id', req.calendar_id);
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
      const next = await listedNextOccurrences([...pageMasters.values()], ctx.tenant);
      return toPage(
        { rows: listed.items, keys: listed.items.map((i) => i.key), ...(listed.next ? { next: listed.next } : {}) },
        (i) =>
          toEvent(i.row, {
            ...(i.occurrence ? { occurrence: i.occurrence, next_occurrence: next.get(i.row.id) ?? null } : {}),
          }),
        encodeOccurrenceCursor,
      );
    },

    async getEvent(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const row = await events.findEvent(pool, ctx.tenant, lower(req.id));
      if (!row) throw errors.notFound('event', req.id);
      return view(pool, ctx.tenant, row);
    },

    async updateEvent(req, ctx) {
      const v = validate().uuid('id', req.id, { required: true }).text('title', req.title, { max: LIMITS.title });
      checkEventFields(v, req, true);
      const { req: r, cleared } = patchNulls(req, { text: TEXT_CLEARABLE, other: OTHER_CLEARABLE }, v);
      v.done();
      const mask = req.update_mask;
      const carried = (f: string) =>
        mask
          ? mask.includes(f)
          : f === 'reminders' || f === 'exdates'
            ? (r as UpdateEventRequest)[f].length > 0
            : (r as unknown as Record<string, unknown>)[f] !== undefined;
      const c = changesOf(r, carried, cleared);
      const metadata = { ...changedFields(c.descriptive), ...changedFields(c.timing) };
      const given = scopes.toDomain(req.update_scope) as Scope | undefined;
      return withTransaction(
        pool,
        async (tx) => {
          const { event, master } = await lockTarget(tx, ctx.tenant, lower(req.id));
          if (!hasDescriptive(c) && !hasTiming(c)) return view(tx, ctx.tenant, event);
          // Set when the change touches one occurrence only (`this`): re-indexing it is enough.
          let oneOccurrence: Date | undefined;
          const out = await (async (): Promise<CalendarEvent> => {
            // A single event: any scope edits it.
            if (!master) {
              if (req.recurrence_id)
                throw errors.invalidField(
                  'recurrence_id',
                  'is only for an occurrence of a recurring event; this event is a single event',
                );
              return view(tx, ctx.tenant, await save(tx, ctx, event, applied(event, c), metadata));
            }
            // An exception's own id: `this` (its default) edits it; the wider scopes act on its series from its occurrence.
            if (event.series_id && (given ?? 'this') === 'this') {
              if (req.recurrence_id && req.recurrence_id.getTime() !== event.recurrence_id!.getTime()) {
                throw errors.invalidField(
                  'recurrence_id',
                  `does not match this exception's own recurrence_id (${event.recurrence_id!.toISOString()})`,
                );
              }
              if (c.timing.rrule !== undefined || c.timing.exdates !== undefined) {
                throw errors.invalidField(
                  c.timing.rrule !== undefined ? 'rrule' : 'exdates',
                  'an exception is one occurrence: change the series with update_scope all on the series',
                );
              }
              oneOccurrence = event.recurrence_id!;
              return view(tx, ctx.tenant, await save(tx, ctx, event, applied(event, c), metadata));
            }
            const scope: Scope = given ?? 'all';
            const recurrenceId = event.series_id ? event.recurrence_id! : req.recurrence_id;
            if (scope === 'all') return view(tx, ctx.tenant, await editSeries(tx, ctx, master, c, metadata));

            const rid = occurrenceId(master, recurrenceId, scope);
            if (scope === 'this') {
              if (c.timing.rrule !== undefined || c.timing.exdates !== undefined) {
                throw errors.invalidField(
                  c.timing.rrule !== undefined ? 'rrule' : 'exdates',
                  'update_scope this changes one occurrence, which has no rule: use this_and_following or all',
                );
              }
              oneOccurrence = rid;
              const existing = (await events.exceptionsOf(tx, ctx.tenant, master.id, 'update')).find(
                (e) => e.recurrence_id!.getTime() === rid.getTime(),
              );
              if (existing) return view(tx, ctx.tenant, await save(tx, ctx, existing, applied(existing, c), metadata));
              const occurrence = recurrence(() => occurrenceAt(master, rid));
              const id = newId();
              const row = await events.insertEvent(
                tx,
                applied({ ...exceptionOf(master, occurrence), id, sequence: master.sequence + 1 }, c),
              );
              return emit(tx, ctx, 'calendar_event.created', row, { series_id: master.id, recurrence_id: rid });
            }

            // this_and_following: at the first occurrence it is `all`.
            const split = recurrence(() => splitSeries(seriesOf(master), rid));
            if (split.kind === 'whole_series')
              return view(tx, ctx.tenant, await editSeries(tx, ctx, master, c, metadata));
            const exceptions = await events.exceptionsOf(tx, ctx.tenant, master.id, 'update');
            const endingTiming = { ...pickTiming(master), rrule: split.ending.rrule, exdates: split.ending.exdates };
            await save(
              tx,
              ctx,
              master,
              { ...master, ...endingTiming, ...derived(endingTiming) },
              { rrule: split.ending.rrule, split_at: rid },
            );
            const id = newId();
            const followingTiming = {
              ...pickTiming(master),
              ...split.following.times,
              ...nullTimes(split.following.times.is_all_day),
              rrule: split.following.rrule,
              exdates: split.following.exdates,
            };
            const following = applied(
              {
                ...master,
                ...followingTiming,
                ...derived(followingTiming),
                id,
                ical_uid: icalUid(id),
                sequence: master.sequence + 1,
              },
              c,
            );
            const created = await events.insertEvent(tx, following);
            await emit(tx, ctx, 'calendar_event.created', created, { split_from: master.id, recurrence_id: rid });
            const orphans: string[] = [];
            for (const ex of exceptions) {
              if (ex.recurrence_id!.getTime() < rid.getTime()) continue;
              if (movesSeries(c) && !recurrence(() => isOccurrence(seriesOf(created), ex.recurrence_id!))) {
                orphans.push(ex.id);
                continue;
              }
              await save(
                tx,
                ctx,
                ex,
                { ...applied(ex, c, false), series_id: created.id, ical_uid: created.ical_uid },
                { ...changedFields(c.descriptive), series_id: created.id },
              );
            }
            await remove(tx, ctx, orphans, { reason: 'its occurrence is no longer in the series' });
            return view(tx, ctx.tenant, created);
          })();
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
    },

    async deleteEvent(req, ctx) {
      checkYears(validate().uuid('id', req.id, { required: true }), 'recurrence_id', req.recurrence_id).done();
      const given = scopes.toDomain(req.update_scope) as Scope | undefined;
      await withTransaction(
        pool,
        async (tx) => {
          const { event, master } = await lockTarget(tx, ctx.tenant, lower(req.id));
          const oneOccurrence = await removeScoped(tx, event, master);
          if (master && oneOccurrence) await reindexOccurrence(tx, ctx.tenant, master.id, oneOccurrence);
          else await reindex(tx, ctx.tenant, [master?.id ?? event.id], now());
        },
        { signal: ctx.signal },
      );
      return {};

      /** Deletes what the scope says; returns the occurrence when only it changed (`this`). */
      async function removeScoped(
        tx: PoolClient,
        event: EventRow,
        master: EventRow | undefined,
      ): Promise<Date | undefined> {
        if (!master) {
          await remove(tx, ctx, [event.id], {});
          return undefined;
        }
        const exceptions = await events.exceptionsOf(tx, ctx.tenant, master.id, 'update');
        const scope: Scope = given ?? (event.series_id ? 'this' : 'all');
        if (scope === 'all') {
          await remove(tx, ctx, [master.id, ...exceptions.map((e) => e.id)], {});
          return undefined;
        }
        const rid = event.series_id ? event.recurrence_id! : occurrenceId(master, req.recurrence_id, scope);
        if (scope === 'this') {
          if (master.exdates.length >= LIMITS.exdates)
            throw errors.failedPrecondition(
              'TOO_MANY_EXDATES',
              `the series has ${LIMITS.exdates} exdates already: end it (this_and_following) and start a new one`,
            );
          const timing = { ...pickTiming(master), exdates: [...master.exdates, rid] };
          await save(tx, ctx, master, { ...master, ...timing, ...derived(timing) }, { exdates: timing.exdates });
          await remove(
            tx,
            ctx,
            exceptions.filter((e) => e.recurrence_id!.getTime() === rid.getTime()).map((e) => e.id),
            { series_id: master.id },
          );
          return rid;
        }
        const split = recurrence(() => splitSeries(seriesOf(master), rid));
        if (split.kind === 'whole_series') {
          await remove(tx, ctx, [master.id, ...exceptions.map((e) => e.id)], {});
          return undefined;
        }
        const timing = { ...pickTiming(master), rrule: split.ending.rrule, exdates: split.ending.exdates };
        await save(
          tx,
          ctx,
          master,
          { ...master, ...timing, ...derived(timing) },
          { rrule: split.ending.rrule, ended_before: rid },
        );
        await remove(
          tx,
          ctx,
          exceptions.filter((e) => e.recurrence_id!.getTime() >= rid.getTime()).map((e) => e.id),
          { series_id: master.id },
        );
        return undefined;
      }
    },
  };
}

function durationMs(m: EventRow): number {
  return m.is_all_day
    ? Date.parse(m.end_date!) - Date.parse(m.start_date!) + 2 * 86_400_000
    : m.end_at!.getTime() - m.start_at!.getTime();
}

function pickTiming(r: EventRow) {
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

function nullTimes(allDay: boolean) {
  return allDay ? { start_at: null, end_at: null } : { start_date: null, end_date: null };
}

/** The occurrence of a master that starts (originally) at `rid`. */
function occurrenceAt(master: EventRow, rid: Date): Occurrence {
  // The window [rid - 1 ms, rid + 1 ms) holds it, zero-length or not.
  const found = expandOccurrences(seriesOf(master), {
    from: new Date(rid.getTime() - 1),
    to: new Date(rid.getTime() + 1),
  }).find((o) => o.recurrence_id.getTime() === rid.getTime());
  if (!found) throw errors.invalidField('recurrence_id', 'is not the original start of an occurrence of this series');
  return found;
}

/** A new exception's row: the master's fields with the occurrence's times, no rule. */
function exceptionOf(master: EventRow, o: Occurrence): EventFields {
  const times = o.is_all_day
    ? { is_all_day: true, start_date: o.start_date, end_date: o.end_date, start_at: null, end_at: null }
    : { is_all_day: false, start_at: o.start_at, end_at: o.end_at, start_date: null, end_date: null };
  const timing = { ...times, timezone: master.timezone, rrule: null, exdates: [] };
  const { created_at: _c, updated_at: _u, deleted_at: _d, ...fields } = master;
  return { ...fields, ...timing, ...derived(timing), series_id: master.id, recurrence_id: o.recurrence_id };
}
