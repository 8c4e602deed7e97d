import type { Handlers } from '@workauto/grpc';
import type { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import type { NotesTasksDeps } from './common.js';
import { listBacklinks } from './backlinks/list.js';
import { addNoteTag } from './notes/add-tag.js';
import { createNote } from './notes/create.js';
import { deleteNote } from './notes/delete.js';
import { getNote } from './notes/get.js';
import { listNoteTags } from './notes/list-tags.js';
import { listNotes } from './notes/list.js';
import { removeNoteTag } from './notes/remove-tag.js';
import { updateNote } from './notes/update.js';
import { listTags } from './tags/list.js';
import { completeTask } from './tasks/complete.js';
import { createTask } from './tasks/create.js';
import { deleteTask } from './tasks/delete.js';
import { getTask } from './tasks/get.js';
import { listSubtasks } from './tasks/list-subtasks.js';
import { listTasks } from './tasks/list.js';
import { reopenTask } from './tasks/reopen.js';
import { updateTask } from './tasks/update.js';

export type { NotesTasksDeps } from './common.js';

/** Every rpc of NotesTasksService, one file per rpc: handlers/<resource>/<verb>.ts. */
export function notesTasksHandlers(deps: NotesTasksDeps): Handlers<typeof NotesTasksServiceService> {
  return {
    createNote: createNote(deps),
    listNotes: listNotes(deps),
    getNote: getNote(deps),
    updateNote: updateNote(deps),
    deleteNote: deleteNote(deps),
    addNoteTag: addNoteTag(deps),
    listNoteTags: listNoteTags(deps),
    removeNoteTag: removeNoteTag(deps),
    listTags: listTags(deps),
    listBacklinks: listBacklinks(deps),
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
