import pg from 'pg';
import { createLogger } from '@workauto/logger';
import { testDatabase, callAs, failure, testCallerKeys, TestClient } from '@workauto/testing';
import {
  CalendarServiceService as S,
  CreateEventRequest,
  UpdateEventRequest,
  UpdateScope,
  type CalendarEvent,
} from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { createCalendarService, type RunningService } from './app.js';

export { S, failure };
export const THIS = UpdateScope.UPDATE_SCOPE_THIS;
export const FOLLOWING = UpdateScope.UPDATE_SCOPE_THIS_AND_FOLLOWING;
export const ALL = UpdateScope.UPDATE_SCOPE_ALL;

/** Request messages from the fields a test cares about (enums unset, lists empty). */
export const ev = (p: Partial<CreateEventRequest>): CreateEventRequest => CreateEventRequest.fromPartial(p as never);
export const upd = (p: Partial<UpdateEventRequest>): UpdateEventRequest => UpdateEventRequest.fromPartial(p as never);

/** calendar on a fresh database, called over real gRPC (clock pinned by `now` when given), with a SQL client for checks. */
export async function startCalendar(opts: { now?: () => Date; indexRefreshMs?: number } = {}) {
  const databaseUrl = await testDatabase('calendar');
  const service: RunningService = await createCalendarService(
    { databaseUrl, host: '127.0.0.1', port: 0, callerVerifyKeys: testCallerKeys.verifyKeys, ...opts },
    createLogger('calendar', 'silent'),
  );
  const client = new TestClient('calendar', `127.0.0.1:${service.port}`, {
    volumeThreshold: 100_000,
    deadlineMs: 30_000,
  });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  return {
    client,
    db,
    /** Every occurrence of the window, all pages followed (`limit` per page). */
    async occurrences(
      call: ReturnType<typeof callAs>,
      window: { from: string; to: string; calendar_id?: string },
      limit = 200,
    ): Promise<CalendarEvent[]> {
      const out: CalendarEvent[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.call(
          S.listEvents,
          {
            from: new Date(window.from),
            to: new Date(window.to),
            limit,
            ...(window.calendar_id ? { calendar_id: window.calendar_id } : {}),
            ...(cursor ? { cursor } : {}),
          },
          call,
        );
        out.push(...page.data);
        cursor = page.has_more ? page.next_cursor : undefined;
      } while (cursor);
      return out;
    },
    async stop() {
      client.close();
      await db.end();
      await service.stop();
    },
  };
}

export type Calendar = Awaited<ReturnType<typeof startCalendar>>;

/** Local wall time of an instant in a zone, e.g. "2026-11-02 09:00". */
export function local(at: Date, timeZone: string): string {
  const f = new Intl.DateTimeFormat('sv-SE', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hour12: false,
  });
  return f.format(at);
}

export { newTenant as tenant, badFields } from '@workauto/testing';
