import { newId, withTransaction } from '@workauto/db';
import {
  errors,
  parsePage,
  patchNulls,
  toPage,
  validate,
  changedFields,
  textOrNull,
  type Handlers,
} from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { recurrence } from '../domain/errors.js';
import { canonicalTimezone } from '../domain/recurrence.js';
import * as calendars from '../repo/calendars.js';
import * as events from '../repo/events.js';
import * as feedTokens from '../repo/feed-tokens.js';
import { feedTokenHandlers } from './feed-tokens.js';
import { SOURCE, calendarData, toCalendar, toEvent, eventData, type CalendarDeps } from './common.js';

type H = Handlers<typeof CalendarServiceService>;

/** The calendars' rpcs, their feed URLs' (feed-tokens.ts) included. */
export function calendarHandlers(
  deps: CalendarDeps,
): Pick<
  H,
  | 'createCalendar'
  | 'listCalendars'
  | 'getCalendar'
  | 'updateCalendar'
  | 'deleteCalendar'
  | 'createCalendarFeedToken'
  | 'deleteCalendarFeedToken'
> {
  const { pool } = deps;
  return {
    ...feedTokenHandlers(deps),
    async createCalendar(req, ctx) {
      const timezone = recurrence(() => canonicalTimezone(req.timezone ?? 'UTC'));
      return withTransaction(
        pool,
        async (tx) => {
          const row = await calendars.insertCalendar(tx, {
            id: newId(),
            tenant_id: ctx.tenant,
            name: req.name.trim(),
            description: textOrNull(req.description) ?? null,
            timezone,
            color: req.color?.trim() ?? null,
            metadata: req.metadata ?? {},
          });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'calendar.created',
            resourceType: 'calendar',
            resourceId: row.id,
            data: calendarData(row),
          });
          return toCalendar(row);
        },
        { signal: ctx.signal },
      );
    },

    async listCalendars(req, ctx) {
      const page = parsePage(req);
      return toPage(await calendars.listCalendars(pool, ctx.tenant, page), toCalendar);
    },

    async getCalendar(req, ctx) {
      const row = await calendars.findCalendar(pool, ctx.tenant, req.id.toLowerCase());
      if (!row) throw errors.notFound('calendar', req.id);
      return toCalendar(row);
    },

    async updateCalendar(req, ctx) {
      const v = validate();
      const { req: r } = patchNulls(req, { text: ['description', 'color'] }, v);
      v.done();
      const patch = {
        name: r.name?.trim(),
        description: textOrNull(r.description),
        color: textOrNull(r.color),
        timezone: r.timezone === undefined ? undefined : recurrence(() => canonicalTimezone(r.timezone!)),
        metadata: r.metadata,
      };
      return withTransaction(
        pool,
        async (tx) => {
          const current = await calendars.findCalendar(tx, ctx.tenant, req.id.toLowerCase(), 'update');
          if (!current) throw errors.notFound('calendar', req.id);
          if (Object.values(patch).every((x) => x === undefined)) return toCalendar(current);
          const row = await calendars.updateCalendar(tx, ctx.tenant, current.id, patch);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'calendar.updated',
            resourceType: 'calendar',
            resourceId: row.id,
            data: calendarData(row),
            metadata: changedFields(patch),
          });
          return toCalendar(row);
        },
        { signal: ctx.signal },
      );
    },

    async deleteCalendar(req, ctx) {
      await withTransaction(
        pool,
        async (tx) => {
          // FOR UPDATE waits for event writes holding KEY SHARE on it, and blocks new ones.
          const current = await calendars.findCalendar(tx, ctx.tenant, req.id.toLowerCase(), 'update');
          if (!current) throw errors.notFound('calendar', req.id);
          const row = await calendars.softDeleteCalendar(tx, ctx.tenant, current.id);
          // Its feed URL goes with it (the feed of a deleted calendar is a 404 either way).
          await feedTokens.deleteFeedToken(tx, ctx.tenant, current.id);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'calendar.deleted',
            resourceType: 'calendar',
            resourceId: row.id,
            data: calendarData(row),
            metadata: { deleted_at: row.deleted_at },
          });
          const deleted = await events.softDeleteCalendarEvents(tx, ctx.tenant, current.id);
          // After the events' delete, which waited for changes in flight on them (their index rows included).
          await events.deleteCalendarIndex(tx, ctx.tenant, current.id);
          for (const ev of deleted) {
            await recordEvent(tx, SOURCE, ctx, {
              type: 'calendar_event.deleted',
              resourceType: 'calendar_event',
              resourceId: ev.id,
              parent: { type: 'calendar', id: current.id },
              data: eventData(toEvent(ev)),
              metadata: { deleted_at: ev.deleted_at, deleted_with: current.id },
            });
          }
        },
        { signal: ctx.signal },
      );
      return {};
    },
  };
}
