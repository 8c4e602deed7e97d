import type { Queryable } from '@workauto/db';
import { JobQueue } from '@workauto/jobs';

/** A run's job: claimed by a worker with a lease (@workauto/jobs), due at the run's run_at. */
export interface RunJob {
  run_id: string;
  tenant_id: string;
}

export const runQueue = new JobQueue<RunJob>('agent-runs');

/**
 * Enqueues a run's job in the run's transaction. Its group is the tenant: the worker's maxPerGroup
 * (AGENT_TENANT_CONCURRENCY) caps one tenant's runs in flight across replicas, so a tenant whose
 * runs wait on slow tools cannot take every slot.
 */
export function enqueueRun(db: Queryable, run: { id: string; tenant_id: string; run_at: Date }): Promise<string> {
  return runQueue.enqueue(
    db,
    { run_id: run.id, tenant_id: run.tenant_id },
    { runAt: run.run_at, maxAttempts: 10, group: run.tenant_id },
  );
}
