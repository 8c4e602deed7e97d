import type { Pool } from '@workauto/db';
import { enumMapping, type Handlers } from '@workauto/grpc';
import { resourceJson } from '@workauto/protos';
import {
  EntityType,
  TaskPriority,
  Note,
  Tag,
  Task,
  type NotesTasksServiceService,
} from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { priorityKey } from '../domain/priority.js';
import type { NoteRow } from '../repo/notes.js';
import type { TagRow } from '../repo/tags.js';
import type { TaskRow } from '../repo/tasks.js';

export const SOURCE = 'notes-tasks';
export const priorities = enumMapping(TaskPriority);
export const entityTypes = enumMapping(EntityType);

/** Limits the handlers enforce (docs/notes-tasks.md); fields' lengths and ranges are the proto's rules. */
export const LIMITS = {
  url: 2_048,
  /** Backlinks answer at most this many notes, and at most backlinkBytes of them (under the 4 MiB message limit). */
  backlinks: 1_000,
  backlinkBytes: 3 * 1024 * 1024,
  /** Bare-array lists have no pages: their size is bounded at write (409 past these). */
  subtasksPerTask: 1_000,
  tagsPerNote: 100,
};

export interface NotesTasksDeps {
  pool: Pool;
}

type H = Handlers<typeof NotesTasksServiceService>;
/** The handler of one rpc. */
export type Handler<K extends keyof H> = H[K];

export function toNote(row: NoteRow): Note {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    title: row.title,
    body: row.body,
    is_archived: row.is_archived,
    is_pinned: row.is_pinned,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    deleted_at: row.deleted_at ?? undefined,
    notebook_id: row.notebook_id ?? undefined,
    source_url: row.source_url ?? undefined,
    word_count: row.word_count,
  };
}

export function toTag(row: TagRow): Tag {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    color: row.color ?? undefined,
    description: row.description ?? undefined,
  };
}

export function toTask(row: TaskRow): Task {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    title: row.title,
    position: row.position,
    priority: priorities.fromDomain(row.priority),
    priority_key: priorityKey(row.priority, row.position),
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    assignee_id: row.assignee_id ?? undefined,
    creator_id: row.creator_id ?? undefined,
    parent_id: row.parent_id ?? undefined,
    project_id: row.project_id ?? undefined,
    section_id: row.section_id ?? undefined,
    status_id: row.status_id ?? undefined,
    canceled_at: row.canceled_at ?? undefined,
    completed_at: row.completed_at ?? undefined,
    deleted_at: row.deleted_at ?? undefined,
    due_at: row.due_at ?? undefined,
    next_occurrence: row.next_occurrence ?? undefined,
    snoozed_until: row.snoozed_until ?? undefined,
    deadline: row.deadline ?? undefined,
    due_date: row.due_date ?? undefined,
    start_date: row.start_date ?? undefined,
    description: row.description ?? undefined,
    external_id: row.external_id ?? undefined,
    identifier: row.identifier ?? undefined,
    rrule: row.rrule ?? undefined,
    estimation_minutes: row.estimation_minutes ?? undefined,
    time_spent_minutes: row.time_spent_minutes ?? undefined,
  };
}

// Event data is the resource exactly as the REST API returns it (docs/events.md): the same
// message the handler returns, through the gateway's JSON mapping.
export const noteData = (row: NoteRow) => resourceJson(Note, toNote(row));
export const tagData = (row: TagRow) => resourceJson(Tag, toTag(row));
export const taskData = (row: TaskRow) => resourceJson(Task, toTask(row));

/** The key tag names are compared by: NFC, lowercased with Unicode rules. */
export function tagKey(name: string): string {
  return name.trim().normalize('NFC').toLowerCase();
}
