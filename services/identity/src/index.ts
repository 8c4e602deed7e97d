export { createIdentityService, type IdentityConfig, type RunningService } from './app.js';
export type { OAuthSettings, ProviderConfig } from './oauth.js';
