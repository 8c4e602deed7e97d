import { fileURLToPath } from 'node:url';
import { createLogger, type Logger } from '@workauto/logger';
import { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { notesTasksHandlers } from './handlers/index.js';

export type NotesTasksConfig = ServiceConfig;
export type { RunningService };

/** notes-tasks with the shared start-up (@workauto/service): the same steps for main.ts, make dev and tests. */
export function createNotesTasksService(
  config: NotesTasksConfig,
  logger: Logger = createLogger('notes-tasks'),
): Promise<RunningService> {
  return startService(
    {
      name: 'notes-tasks',
      errorDomain: 'notes.workauto',
      protoFile: 'workauto/notes_tasks/v1/notes_tasks.proto',
      grpcService: 'workauto.notes_tasks.v1.NotesTasksService',
      definition: NotesTasksServiceService,
      migrations: fileURLToPath(new URL('../migrations', import.meta.url)),
      handlers: (pool) => notesTasksHandlers({ pool }),
    },
    config,
    logger,
  );
}
