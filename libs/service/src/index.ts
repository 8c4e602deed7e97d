export {
  startService,
  HEALTH,
  type ServiceConfig,
  type ServiceSpec,
  type RunningService,
  type WorkerDeps,
} from './service.js';
export { untilAvailable, untilDatabaseAnswers, describeDatabase, type WaitOptions } from './database.js';
export { WorkerSupervisor, type Worker, type WorkerContext, type WorkerOptions } from './workers.js';
export { DependencyUnavailableError } from './dependency-error.js';
