export {
  createAgentsService,
  DEFAULT_PROVIDER_SETTINGS,
  type AgentsConfig,
  type AgentsService,
  type RunningService,
} from './app.js';
