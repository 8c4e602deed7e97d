import type { Handlers } from '@workauto/grpc';
import type { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import type { NotesTasksDeps } from './common.js';
import { noteHandlers } from './notes.js';
import { completeTask, reopenTask } from './tasks/complete.js';
import { createTask } from './tasks/create.js';
import { deleteTask } from './tasks/delete.js';
import { getTask, listSubtasks, listTasks } from './tasks/reads.js';
import { updateTask } from './tasks/update.js';

export type { NotesTasksDeps } from './common.js';

/** Every rpc of NotesTasksService: notes, tags and backlinks in notes.ts; tasks/, one file per rpc or concern. */
export function notesTasksHandlers(deps: NotesTasksDeps): Handlers<typeof NotesTasksServiceService> {
  return {
    ...noteHandlers(deps),
    createTask: createTask(deps),
    listTasks: listTasks(deps),
    getTask: getTask(deps),
    updateTask: updateTask(deps),
    deleteTask: deleteTask(deps),
    listSubtasks: listSubtasks(deps),
    completeTask: completeTask(deps),
    reopenTask: reopenTask(deps),
  };
}
