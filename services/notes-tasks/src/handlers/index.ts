import type { Handlers } from '@workauto/grpc';
import type { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import type { NotesTasksDeps } from './common.js';
import { createNote } from './notes/create.js';
import { deleteNote } from './notes/delete.js';
import { getNote, listBacklinks, listNotes } from './notes/reads.js';
import { addNoteTag, listNoteTags, listTags, removeNoteTag } from './notes/tags.js';
import { updateNote } from './notes/update.js';
import { completeTask, reopenTask } from './tasks/complete.js';
import { createTask } from './tasks/create.js';
import { deleteTask } from './tasks/delete.js';
import { getTask, listSubtasks, listTasks } from './tasks/reads.js';
import { updateTask } from './tasks/update.js';

export type { NotesTasksDeps } from './common.js';

/** Every rpc of NotesTasksService: notes/ (with tags and backlinks) and tasks/, one file per rpc or concern. */
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
