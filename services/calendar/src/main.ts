import { runService } from '@workauto/service/main';

await runService({
  name: 'calendar',
  grpcPort: 50054,
  // Imported here, after telemetry started, so its instrumentations see grpc and pg.
  start: async (config, _env, logger) => (await import('./app.js')).createCalendarService(config, logger),
});
