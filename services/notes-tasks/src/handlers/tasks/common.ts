import type { PoolClient } from '@workauto/db';
import { errors, type CallContext, type Validator } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { CreateTaskRequest, UpdateTaskRequest } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { dueInstant, nextOccurrence, rruleProblem, type Due } from '../../domain/recurrence.js';
import type { TaskRow } from '../../repo/tasks.js';
import { LIMITS, SOURCE, taskData } from '../common.js';

// What the task handlers share: field checks, a task's recurrence columns, its events.

/** An optional id as stored: lowercase, or null when absent or empty. */
export const lower = (id: string | undefined) => (id ? id.toLowerCase() : undefined);

/** The task's current occurrence: due_at, or due_date; undefined with none or (invalid for a rrule) both. */
export function dueOf(t: { due_at: Date | null; due_date: string | null }): Due | undefined {
  if (t.due_at && !t.due_date) return { kind: 'at', at: t.due_at };
  if (t.due_date && !t.due_at) return { kind: 'date', date: t.due_date };
  return undefined;
}

/** The field check of create and update that the proto's rules cannot state: the rrule's grammar. */
export function checkTaskFields(
  v: Validator,
  req: CreateTaskRequest | UpdateTaskRequest,
  clearable: boolean,
): Validator {
  // Lengths, ids, dates, years, the priority, minutes and metadata's size are the proto's rules (docs/api.md §16).
  if (req.rrule !== undefined && !(clearable && req.rrule === '')) {
    const problem = rruleProblem(req.rrule, undefined);
    if (problem) v.add('rrule', problem);
  }
  return v;
}

/**
 * The recurrence columns for a task's rule and due: the anchor (DTSTART) is the due, and
 * next_occurrence the occurrence after it. Throws a 400 for a rule the due cannot carry.
 */
export function recurrence(
  rrule: string | null,
  due: { due_at: Date | null; due_date: string | null },
): { rrule_anchor: Date | null; next_occurrence: Date | null } {
  if (!rrule) return { rrule_anchor: null, next_occurrence: null };
  const current = dueOf(due);
  if (!current)
    throw errors.invalidField(
      'rrule',
      'a recurring task needs exactly one of due_at and due_date (its first occurrence)',
    );
  const anchor = dueInstant(current);
  const problem = rruleProblem(rrule, current.kind, anchor);
  if (problem) throw errors.invalidField('rrule', problem);
  const next = nextOccurrence(rrule, anchor, current);
  return { rrule_anchor: anchor, next_occurrence: next ? dueInstant(next) : null };
}

/** A task's subtasks come back as one array (GET /tasks/{id}/subtasks, no pages): their number is bounded here. */
export function assertRoomForSubtask(liveSubtasks: number): void {
  if (liveSubtasks >= LIMITS.subtasksPerTask)
    throw errors.failedPrecondition(
      'TOO_MANY_SUBTASKS',
      `a task has at most ${LIMITS.subtasksPerTask} subtasks; complete and delete some, or group them under a subtask`,
    );
}

export async function emit(
  tx: PoolClient,
  ctx: CallContext,
  type: string,
  row: TaskRow,
  metadata?: Record<string, unknown>,
): Promise<void> {
  await recordEvent(tx, SOURCE, ctx, {
    type,
    resourceType: 'task',
    resourceId: row.id,
    data: taskData(row),
    ...(row.parent_id ? { parent: { type: 'task', id: row.parent_id } } : {}),
    ...(metadata ? { metadata } : {}),
  });
}
