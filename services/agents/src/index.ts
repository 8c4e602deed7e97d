export { createAgentsService, DEFAULT_PROVIDER_SETTINGS, type AgentsConfig, type RunningService } from './app.js';
