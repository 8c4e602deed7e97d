import { withTransaction, type Pool } from '@workauto/db';
import { PeriodicWorker } from '@workauto/jobs';
import type { Logger } from '@workauto/logger';
import { INDEX_HORIZON_DAYS, INDEX_REFRESH_DAYS } from './domain/occurrence-index.js';
import { reindex } from './occurrence-index.js';
import * as events from './repo/events.js';

const DAY_MS = 86_400_000;
const BATCH = 50;

/**
 * Moves the occurrence index forward as time passes: every `everyMs`, the series whose indexed
 * stretch ends within INDEX_HORIZON_DAYS - INDEX_REFRESH_DAYS of now are indexed again (to 400
 * days ahead); a dense series whose index is capped, when less than INDEX_REFRESH_DAYS is left.
 * Every replica runs it and they share the work: each batch locks its masters with SKIP LOCKED,
 * and a master being changed by a request is skipped (that request reindexes it). Listings stay
 * right without it (unindexed stretches are expanded on read), only slower.
 */
export function indexExtender(pool: Pool, logger: Logger, now: () => Date, everyMs: number): PeriodicWorker {
  return new PeriodicWorker({
    name: 'calendar-index-extender',
    replicas: 'every',
    everyMs,
    logger,
    tick: async ({ signal, beat }) => {
      for (;;) {
        const done = await withTransaction(
          pool,
          async (tx) => {
            const at = now();
            const due = await events.mastersToReindex(
              tx,
              new Date(at.getTime() + (INDEX_HORIZON_DAYS - INDEX_REFRESH_DAYS) * DAY_MS),
              new Date(at.getTime() + INDEX_REFRESH_DAYS * DAY_MS),
              BATCH,
            );
            for (const m of due) await reindex(tx, m.tenant_id, [m.id], at);
            return due.length;
          },
          { signal },
        );
        beat();
        if (done) logger.info({ series: done }, 'occurrence index moved forward');
        if (done < BATCH || signal.aborted) return;
      }
    },
  });
}
