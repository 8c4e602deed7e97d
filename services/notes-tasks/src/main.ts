import { runService } from '@workauto/service/main';

await runService({
  name: 'notes-tasks',
  grpcPort: 50052,
  // Imported here, after telemetry started, so its instrumentations see grpc and pg.
  start: async (config, _env, logger) => (await import('./app.js')).createNotesTasksService(config, logger),
});
