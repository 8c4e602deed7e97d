import { setTimeout as sleep } from 'node:timers/promises';
import { withTransaction, type Pool } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import type { Worker } from '@workauto/service';
import { INDEX_HORIZON_DAYS, INDEX_REFRESH_DAYS } from './domain/occurrence-index.js';
import { reindex } from './occurrence-index.js';
import * as events from './repo/events.js';

const DAY_MS = 86_400_000;
const BATCH = 50;
/** Beats at least this often while waiting (the supervisor calls a silent loop stuck after 60 s). */
const BEAT_MS = 10_000;

/**
 * Moves the occurrence index forward as time passes: every `everyMs`, the series whose indexed
 * stretch ends within INDEX_HORIZON_DAYS - INDEX_REFRESH_DAYS of now are indexed again (to 400
 * days ahead); a dense series whose index is capped, when less than INDEX_REFRESH_DAYS is left. Replicas share the work: each batch locks its masters with SKIP LOCKED, and a
 * master being changed by a request is skipped (that request reindexes it). Listings stay right
 * without it (unindexed stretches are expanded on read), only slower.
 */
export function indexExtender(pool: Pool, logger: Logger, now: () => Date, everyMs: number): Worker {
  return {
    name: 'calendar-index-extender',
    async run(ctx) {
      while (!ctx.signal.aborted) {
        ctx.beat();
        try {
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
              { signal: ctx.signal },
            );
            ctx.beat();
            if (done) logger.info({ series: done }, 'occurrence index moved forward');
            if (done < BATCH || ctx.signal.aborted) break;
          }
        } catch (err) {
          if (!ctx.signal.aborted)
            logger.warn({ err }, 'moving the occurrence index forward failed; retrying at the next turn');
        }
        for (let waited = 0; waited < everyMs && !ctx.signal.aborted; waited += BEAT_MS) {
          await sleep(Math.min(BEAT_MS, everyMs - waited), undefined, { signal: ctx.signal }).catch(() => undefined);
          ctx.beat();
        }
      }
    },
  };
}
