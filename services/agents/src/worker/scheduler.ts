/**
 * The scheduler: every config with a schedule gets one run per cron tick (UTC). One replica at a
 * time checks the schedules (a periodic worker under the job queue's lease); a due config is
 * locked with SKIP LOCKED all the same, and the run's unique (tenant, blueprint, tick) makes a
 * second run of a tick impossible even when two checks overlap (a lease taken over). After
 * downtime only the latest missed tick runs. A paused schedule (5 failures in a row) is skipped
 * until a PUT.
 */
import { withTransaction, type Pool } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { PeriodicWorker, type Clock } from '@workauto/jobs';
import type { Logger } from '@workauto/logger';
import { latestTick, nextTick } from '../domain/schedule.js';
import { SOURCE, runData } from '../handlers/common.js';
import * as configs from '../repo/configs.js';
import * as runs from '../repo/runs.js';
import { enqueueRun } from './queue.js';

/** Creates the run of every schedule due at `now` (its latest tick only); returns how many it created. */
export async function scheduleDueRuns(pool: Pool, now = new Date()): Promise<number> {
  return withTransaction(pool, async (tx) => {
    let created = 0;
    for (const config of await configs.dueSchedules(tx, now, 100)) {
      const schedule = config.schedule!;
      const tick = latestTick(schedule, now);
      if (tick) {
        const run = await runs.insertRun(tx, {
          tenant_id: config.tenant_id,
          agent_blueprint: config.agent_blueprint,
          input: null,
          run_at: tick,
          budget_usd_cents: config.budget_default_cents,
          deadline_seconds: config.deadline_default_seconds,
          scheduled_for: tick,
        });
        if (run) {
          created++;
          await enqueueRun(tx, run);
          await recordEvent(
            tx,
            SOURCE,
            { tenantId: run.tenant_id, requestId: run.id, actor: { type: 'system', id: 'scheduler' } },
            {
              type: 'agent_run.created',
              resourceType: 'agent_run',
              resourceId: run.id,
              data: runData(run),
              metadata: { scheduled_for: tick.toISOString() },
            },
          );
        }
      }
      await configs.setNextTick(tx, config.id, nextTick(schedule, now));
    }
    return created;
  });
}

/** Checks the schedules every pollMs (AGENT_SCHEDULER_POLL_MS) on one replica at a time. */
export function schedulerWorker(pool: Pool, logger: Logger, pollMs: number, clock?: Clock): PeriodicWorker {
  return new PeriodicWorker({
    name: 'agent-scheduler',
    replicas: 'one',
    pool,
    everyMs: pollMs,
    logger,
    ...(clock ? { clock } : {}),
    tick: async ({ now }) => void (await scheduleDueRuns(pool, now)),
  });
}
