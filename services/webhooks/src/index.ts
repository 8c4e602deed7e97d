export { createWebhooksService, type WebhooksConfig, type RunningService } from './app.js';
export { webhookEnv, settingsFromEnv, defaultSettings, type WebhookSettings } from './settings.js';
