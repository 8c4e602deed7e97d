import { fileURLToPath } from 'node:url';
import { createLogger, type Logger } from '@workauto/logger';
import { CalendarServiceService } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { calendarServiceHandlers } from './handlers/index.js';
import { indexExtender } from './index-extender.js';

export interface CalendarConfig extends ServiceConfig {
  /** The clock next_occurrence is computed against (tests pin it); the system clock by default. */
  now?: () => Date;
  /** How often the occurrence index is moved forward (default hourly; tests use less). */
  indexRefreshMs?: number;
}
export type { RunningService };

/** calendar with the shared start-up (@workauto/service): the same steps for main.ts, make dev and tests. */
export function createCalendarService(
  config: CalendarConfig,
  logger: Logger = createLogger('calendar'),
): Promise<RunningService> {
  const now = config.now ?? (() => new Date());
  return startService(
    {
      name: 'calendar',
      errorDomain: 'calendar.workauto',
      protoFile: 'workauto/calendar/v1/calendar.proto',
      grpcService: 'workauto.calendar.v1.CalendarService',
      definition: CalendarServiceService,
      migrations: fileURLToPath(new URL('../migrations', import.meta.url)),
      handlers: (pool) => calendarServiceHandlers({ pool, logger, now }),
      workers: ({ pool, logger: workerLogger }) => [
        indexExtender(pool, workerLogger, now, config.indexRefreshMs ?? 3_600_000),
      ],
    },
    config,
    logger,
  );
}
