import type { EventType } from './types.js';

/** Events of the notes-tasks service (docs/events.md § notes-tasks). */
export const NOTES_TASKS_EVENT_TYPES: readonly EventType[] = [
  { name: 'note.created', description: 'A note was created: POST /notes' },
  { name: 'note.updated', description: 'A note was updated: PATCH /notes/{id}' },
  { name: 'note.deleted', description: 'A note was deleted: DELETE /notes/{id} (soft; its backlink rows are removed)' },
  {
    name: 'tag.created',
    description: 'A tag was created: POST /notes/{id}/tags with a name the tenant has no tag for',
  },
  {
    name: 'note.tagged',
    description:
      'A tag was attached to a note: POST /notes/{id}/tags that attaches (not when the note had the tag already)',
  },
  { name: 'note.untagged', description: 'A tag was removed from a note: DELETE /notes/{id}/tags/{tag_id}' },
  { name: 'task.created', description: 'A task was created: POST /tasks' },
  { name: 'task.updated', description: 'A task was updated: PATCH /tasks/{id} that sets fields' },
  {
    name: 'task.moved',
    description:
      "A task moved (new parent or position): PATCH /tasks/{id} that changes the task's parent or position (siblings renumbered by it get no event of their own)",
  },
  {
    name: 'task.completed',
    description:
      'A task was completed: POST /tasks/{id}/complete: the task, then each open subtask it completes; a recurring task that advances (it stays open)',
  },
  { name: 'task.reopened', description: 'A task was reopened: POST /tasks/{id}/reopen of a completed task' },
  {
    name: 'task.deleted',
    description: 'A task was deleted: DELETE /tasks/{id} (soft): the task, then each of its subtasks',
  },
];
