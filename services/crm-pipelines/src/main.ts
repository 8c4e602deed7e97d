import { runService } from '@workauto/service/main';

await runService({
  name: 'crm-pipelines',
  grpcPort: 50053,
  // Imported here, after telemetry started, so its instrumentations see grpc and pg.
  start: async (config, _env, logger) => (await import('./app.js')).createCrmPipelinesService(config, logger),
});
