import { withTransaction, type PoolClient } from '@workauto/db';
import { changedFields, errors, patchNulls, validate } from '@workauto/grpc';
import type { UpdateTaskRequest } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { place, sameOrder, type Anchor } from '../../domain/ordering.js';
import type { Priority } from '../../domain/priority.js';
import { normalizeRrule } from '../../domain/recurrence.js';
import * as tasks from '../../repo/tasks.js';
import type { TaskRow } from '../../repo/tasks.js';
import { priorities, toTask, type Handler, type NotesTasksDeps } from '../common.js';
import { assertRoomForSubtask, checkTaskFields, emit, lower, recurrence } from './common.js';

/** Optional fields a PATCH clears with null (or, for text, ids and dates, also with ''). */
const CLEARABLE = [
  'description',
  'assignee_id',
  'project_id',
  'section_id',
  'status_id',
  'due_at',
  'due_date',
  'deadline',
  'start_date',
  'rrule',
  'estimation_minutes',
  'time_spent_minutes',
  'external_id',
  'identifier',
  'snoozed_until',
] as const;
type Clearable = (typeof CLEARABLE)[number];

export function updateTask({ pool }: NotesTasksDeps): Handler<'updateTask'> {
  return async (req, ctx) => {
    const v = checkTaskFields(validate(), req, true)
      .check(!(req.before_id && req.after_id), 'after_id', 'give before_id or after_id, not both')
      .check(!req.parent_id || lower(req.parent_id) !== lower(req.id), 'parent_id', 'a task cannot be its own parent')
      .check(
        !req.before_id || lower(req.before_id) !== lower(req.id),
        'before_id',
        'must be another task than the one moved',
      )
      .check(
        !req.after_id || lower(req.after_id) !== lower(req.id),
        'after_id',
        'must be another task than the one moved',
      );
    // null parent_id moves the task to the top level; null before_id/after_id are no anchor.
    const { cleared: clear } = patchNulls(req, { other: [...CLEARABLE, 'parent_id', 'before_id', 'after_id'] }, v);
    v.done();
    const tenantId = ctx.tenant;
    const id = req.id.toLowerCase();
    const anchor: Anchor = req.before_id
      ? { before: req.before_id.toLowerCase() }
      : req.after_id
        ? { after: req.after_id.toLowerCase() }
        : undefined;
    const reparent = req.parent_id !== undefined || clear.has('parent_id');
    const moving = reparent || anchor !== undefined;
    const patch = patchOf(req, clear);
    const fieldsChanged = Object.values(patch).some((x) => x !== undefined);
    const touchesRecurrence = patch.rrule !== undefined || patch.due_at !== undefined || patch.due_date !== undefined;

    return withTransaction(
      pool,
      async (tx) => {
        if (fieldsChanged && !moving && !touchesRecurrence) {
          // Nothing of the task before is needed: the update takes its row lock, and a missing or
          // deleted task is not updated (a round trip fewer than reading it first).
          const row = await tasks.updateLiveTask(tx, tenantId, id, patch);
          if (!row) throw errors.notFound('task', req.id);
          await emit(tx, ctx, 'task.updated', row, changedFields(patch));
          return toTask(row);
        }
        if (moving) await tasks.lockTree(tx, tenantId, reparent ? 'exclusive' : 'shared');
        let current = await tasks.findTask(tx, tenantId, id, moving ? undefined : 'update');
        if (!current) throw errors.notFound('task', req.id);
        let moved: Record<string, unknown> | undefined;
        if (moving) {
          const target = reparent ? (!req.parent_id ? null : req.parent_id.toLowerCase()) : current.parent_id;
          ({ row: current, moved } = await moveTask(tx, current, target, anchor));
        }
        let row = current;
        if (fieldsChanged) {
          const state = {
            rrule: patch.rrule !== undefined ? patch.rrule : current.rrule,
            due_at: patch.due_at !== undefined ? patch.due_at : current.due_at,
            due_date: patch.due_date !== undefined ? patch.due_date : current.due_date,
          };
          // A new rule or due restarts the series at the (new) due.
          const rec = touchesRecurrence ? recurrence(state.rrule, state) : {};
          row = await tasks.updateTask(tx, tenantId, current.id, { ...patch, ...rec });
          await emit(tx, ctx, 'task.updated', row, changedFields(patch));
        }
        if (moved) await emit(tx, ctx, 'task.moved', row, moved);
        return toTask(row);
      },
      { signal: ctx.signal },
    );
  };
}

/** The fields a PATCH changes: a value, null (cleared: null, or '' for text, ids and dates), or undefined (kept). */
function patchOf(req: UpdateTaskRequest, clear: ReadonlySet<string>) {
  const text = (f: Clearable, value: string | undefined, transform: (s: string) => string = (s) => s) =>
    clear.has(f) ? null : value === undefined ? undefined : value.trim() === '' ? null : transform(value.trim());
  const other = <T>(f: Clearable, value: T | undefined) => (clear.has(f) ? null : value);
  return {
    title: req.title?.trim(),
    description: text('description', req.description),
    assignee_id: text('assignee_id', req.assignee_id, (s) => s.toLowerCase()),
    project_id: text('project_id', req.project_id, (s) => s.toLowerCase()),
    section_id: text('section_id', req.section_id, (s) => s.toLowerCase()),
    status_id: text('status_id', req.status_id, (s) => s.toLowerCase()),
    priority: priorities.toDomain(req.priority) as Priority | undefined,
    due_at: other('due_at', req.due_at),
    due_date: text('due_date', req.due_date),
    deadline: text('deadline', req.deadline),
    start_date: text('start_date', req.start_date),
    rrule: text('rrule', req.rrule, normalizeRrule),
    estimation_minutes: other('estimation_minutes', req.estimation_minutes),
    time_spent_minutes: other('time_spent_minutes', req.time_spent_minutes),
    external_id: text('external_id', req.external_id),
    identifier: text('identifier', req.identifier),
    snoozed_until: other('snoozed_until', req.snoozed_until),
    metadata: req.metadata,
  };
}

/**
 * Moves a task under `target` (null: the top level), placed by `anchor` (default: last), holding
 * the tree lock the caller took. Returns the task after the move, and the task.moved metadata when
 * its parent or position changed.
 */
async function moveTask(
  tx: PoolClient,
  current: TaskRow,
  target: string | null,
  anchor: Anchor,
): Promise<{ row: TaskRow; moved?: Record<string, unknown> }> {
  const { tenant_id: tenantId, id } = current;
  const from = { parent_id: current.parent_id, position: current.position };
  await tasks.lockSiblingSets(tx, tenantId, [current.parent_id, target]);
  if (target !== current.parent_id && target !== null) {
    if (!(await tasks.findTask(tx, tenantId, target)))
      throw errors.invalidField('parent_id', `no task ${target} in this tenant`);
    if (await tasks.isSelfOrAncestor(tx, tenantId, current.id, target)) {
      throw errors.invalidField(
        'parent_id',
        `task ${target} is a subtask of this task (at some depth): moving it there would make a cycle`,
      );
    }
  }
  // Locks the siblings' rows (this task's included) in id order, then re-reads the task.
  const oldIds = await tasks.siblingIds(tx, tenantId, current.parent_id, true);
  const locked = (await tasks.findTask(tx, tenantId, id))!;
  const anchorField = anchor && 'before' in anchor ? 'before_id' : 'after_id';
  if (target === locked.parent_id) {
    const order = place(oldIds, locked.id, anchor);
    if (!order) throw errors.invalidField(anchorField, 'must be a live task under the same parent as the moved task');
    if (!sameOrder(order, oldIds)) await tasks.setPositions(tx, tenantId, order);
  } else {
    const newIds = await tasks.siblingIds(tx, tenantId, target, true);
    if (target !== null) assertRoomForSubtask(newIds.length);
    const order = place(newIds, locked.id, anchor);
    if (!order)
      throw errors.invalidField(anchorField, `must be a live task under the new parent ${target ?? '(top level)'}`);
    await tasks.setPositions(
      tx,
      tenantId,
      oldIds.filter((x) => x !== locked.id),
    );
    await tasks.updateTask(tx, tenantId, locked.id, { parent_id: target });
    await tasks.setPositions(tx, tenantId, order);
  }
  const after = (await tasks.findTask(tx, tenantId, id))!;
  if (after.parent_id === from.parent_id && after.position === from.position) return { row: after };
  return {
    row: after,
    moved: {
      from_parent_id: from.parent_id,
      from_position: from.position,
      parent_id: after.parent_id,
      position: after.position,
    },
  };
}
