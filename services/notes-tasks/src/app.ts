import { fileURLToPath } from 'node:url';
import { createPool, runMigrations } from '@workauto/db';
import { LocalTransport, OUTBOX_MIGRATIONS, OutboxRelay, type EventTransport } from '@workauto/events';
import { GrpcServer, Resources } from '@workauto/grpc';
import { createLogger, type Logger } from '@workauto/logger';
import { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { notesTasksHandlers } from './handlers/index.js';

export interface NotesTasksConfig {
  databaseUrl: string;
  host: string;
  port: number;
  /** Event streams (Kafka, or in-process for one-process runs); a private in-process one by default. */
  transport?: EventTransport;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** Database → migrations → gRPC server → outbox relay, then SERVING. The same steps for main.ts, make dev and tests. */
export async function createNotesTasksService(config: NotesTasksConfig, logger: Logger = createLogger('notes-tasks')): Promise<RunningService> {
  const resources = new Resources();
  return resources.start(async () => {
    const pool = resources.add(createPool(config.databaseUrl, { applicationName: 'notes-tasks' }), (p) => p.end());
    const applied = await runMigrations(pool, [OUTBOX_MIGRATIONS, MIGRATIONS]);
    if (applied.length) logger.info({ applied }, 'migrations applied');
    const server = new GrpcServer({ name: 'notes-tasks', errorDomain: 'notes.workauto', logger, protoFiles: ['workauto/notes_tasks/v1/notes_tasks.proto'] });
    server.add('workauto.notes_tasks.v1.NotesTasksService', NotesTasksServiceService, notesTasksHandlers({ pool }));
    resources.add(await OutboxRelay.start({ pool, transport: config.transport ?? new LocalTransport(), source: 'notes-tasks', logger }), (r) => r.stop());
    // Closed first on stop: in-flight calls drain while the relay can still publish their events.
    resources.add(server, (s) => s.shutdown());
    const port = await server.listen(config.host, config.port);
    server.markServing();
    logger.info({ port }, 'notes-tasks serving');
    return { port, stop: () => resources.close() };
  });
}
