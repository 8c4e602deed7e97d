export { createCrmPipelinesService, type CrmPipelinesConfig, type RunningService } from './app.js';
