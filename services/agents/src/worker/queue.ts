import { JobQueue } from '@workauto/jobs';

/** A run's job: claimed by a worker with a lease (@workauto/jobs), due at the run's run_at. */
export interface RunJob {
  run_id: string;
  tenant_id: string;
}

export const runQueue = new JobQueue<RunJob>('agent-runs');
