import type { Handlers } from '@workauto/grpc';
import type { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import type { NotesTasksDeps } from './common.js';
import { noteHandlers } from './notes.js';
import { taskHandlers } from './tasks.js';

export type { NotesTasksDeps } from './common.js';

/** Every rpc of NotesTasksService; notes, tags and backlinks in notes.ts, tasks in tasks.ts. */
export function notesTasksHandlers(deps: NotesTasksDeps): Handlers<typeof NotesTasksServiceService> {
  return {
    ...noteHandlers(deps),
    ...taskHandlers(deps),
  };
}
