export { createIdentityService, type IdentityConfig, type RunningService } from './app.js';
