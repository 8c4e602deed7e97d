export { createAppsService, type AppsConfig, type RunningService } from './app.js';
