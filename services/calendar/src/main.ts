import { migrationsOf, runService } from '@workauto/service/main';

await runService({
  name: 'calendar',
  grpcPort: 50054,
  // The migrate command's folders, as app.ts's ServiceSpec lists them (the start checks they match).
  migrations: [migrationsOf(import.meta.url)],
  // Imported here, after telemetry started, so its instrumentations see grpc and pg.
  start: async (config, _env, logger) => (await import('./app.js')).createCalendarService(config, logger),
});
