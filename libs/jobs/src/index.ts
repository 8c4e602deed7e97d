export {
  JobQueue,
  JobWorker,
  RetryLater,
  PermanentFailure,
  SUCCESS_RECORDED,
  JOBS_MIGRATIONS,
  exponentialBackoff,
  type Job,
  type JobState,
  type JobStatus,
  type EnqueueOptions,
  type WorkerOptions,
} from './queue.js';
export { PeriodicWorker, systemClock, type Clock, type PeriodicOptions, type TickContext } from './periodic.js';
