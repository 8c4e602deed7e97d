import { newId, type PoolClient, withTransaction } from '@workauto/db';
import {
  errors,
  parsePage,
  toPage,
  validate,
  type CallContext,
  type Handlers,
  type Validator,
  isIsoDate,
  patchNulls,
  changedFields,
  checkEnum,
  checkMetadata,
  textOrNull,
  checkId,
  checkDate,
  checkYears,
} from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type {
  CreateTaskRequest,
  NotesTasksServiceService,
  UpdateTaskRequest,
} from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { parseTimestamp } from '../domain/dates.js';
import { place, sameOrder, type Anchor } from '../domain/ordering.js';
import type { Priority } from '../domain/priority.js';
import {
  RecurrenceLimitError,
  compareDue,
  dueInstant,
  nextOccurrence,
  normalizeRrule,
  rruleProblem,
  type Due,
} from '../domain/recurrence.js';
import * as tasks from '../repo/tasks.js';
import { LIMITS, SOURCE, priorities, taskData, toTask, type NotesTasksDeps } from './common.js';
import { checkMinutes } from './validation.js';

type H = Handlers<typeof NotesTasksServiceService>;

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

/** An optional id as stored: lowercase, or null when absent or empty. */
const lower = (id: string | undefined) => (id ? id.toLowerCase() : undefined);

/** The task's current occurrence: due_at, or due_date; undefined with none or (invalid for a rrule) both. */
function dueOf(t: { due_at: Date | null; due_date: string | null }): Due | undefined {
  if (t.due_at && !t.due_date) return { kind: 'at', at: t.due_at };
  if (t.due_date && !t.due_at) return { kind: 'date', date: t.due_date };
  return undefined;
}

const dueJson = (d: Due) => (d.kind === 'at' ? d.at.toISOString() : d.date);

/** Field checks common to create and update. */
function checkTaskFields(v: Validator, req: CreateTaskRequest | UpdateTaskRequest, clearable: boolean): Validator {
  v.text('description', req.description, { min: 0, max: LIMITS.taskDescription })
    .text('external_id', req.external_id, { min: clearable ? 0 : 1, max: LIMITS.externalId })
    .text('identifier', req.identifier, { min: clearable ? 0 : 1, max: LIMITS.identifier });
  for (const f of ['parent_id', 'assignee_id', 'project_id', 'section_id', 'status_id'] as const)
    checkId(v, f, req[f], clearable);
  for (const f of ['due_date', 'deadline', 'start_date'] as const) checkDate(v, f, req[f], clearable);
  for (const f of ['due_at', 'due_date', 'deadline', 'start_date'] as const) checkYears(v, f, req[f]);
  checkEnum(v, 'priority', req.priority, priorities, false);
  checkMinutes(v, 'estimation_minutes', req.estimation_minutes);
  checkMinutes(v, 'time_spent_minutes', req.time_spent_minutes);
  if (req.rrule !== undefined && !(clearable && req.rrule === '')) {
    const problem = rruleProblem(req.rrule, undefined);
    if (problem) v.add('rrule', problem);
  }
  return checkMetadata(v, 'metadata', req.metadata);
}

/**
 * The recurrence columns for a task's rule and due: the anchor (DTSTART) is the due, and
 * next_occurrence the occurrence after it. Throws a 400 for a rule the due cannot carry.
 */
function recurrence(
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

/** nextOccurrence at completion: a rule that finds none within its evaluation limits is a 409 the client resolves by changing the rule. */
function occurrenceToComplete(rrule: string, anchor: Date, after: Due): Due | undefined {
  try {
    return nextOccurrence(rrule, anchor, after);
  } catch (err) {
    if (!(err instanceof RecurrenceLimitError)) throw err;
    throw errors.failedPrecondition(
      'RRULE_NOT_EVALUABLE',
      `the task's rrule ${err.message}; change the rrule with PATCH and complete the task again`,
    );
  }
}

async function emit(
  tx: PoolClient,
  ctx: CallContext,
  type: string,
  row: tasks.TaskRow,
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

export function taskHandlers({
  pool,
}: NotesTasksDeps): Pick<
  H,
  'createTask' | 'listTasks' | 'getTask' | 'updateTask' | 'deleteTask' | 'listSubtasks' | 'completeTask' | 'reopenTask'
> {
  return {
    async createTask(req, ctx) {
      const v = validate().text('title', req.title, { required: true, max: LIMITS.taskTitle });
      checkTaskFields(v, req, false).done();
      const tenantId = ctx.tenant;
      const parentId = lower(req.parent_id) ?? null;
      const rrule = req.rrule === undefined ? null : normalizeRrule(req.rrule);
      const due = { due_at: req.due_at ?? null, due_date: req.due_date ?? null };
      const rec = recurrence(rrule, due);
      return withTransaction(
        pool,
        async (tx) => {
          await tasks.lockTree(tx, tenantId, 'shared');
          await tasks.lockSiblingSets(tx, tenantId, [parentId]);
          if (parentId && !(await tasks.findTask(tx, tenantId, parentId)))
            throw errors.invalidField('parent_id', `no task ${parentId} in this tenant`);
          const siblings = await tasks.siblingIds(tx, tenantId, parentId);
          const row = await tasks.insertTask(tx, {
            id: newId(),
            tenant_id: tenantId,
            parent_id: parentId,
            title: req.title.trim(),
            description: textOrNull(req.description) ?? null,
            position: siblings.length + 1,
            priority: (priorities.toDomain(req.priority) as Priority | undefined) ?? 'none',
            assignee_id: lower(req.assignee_id) ?? null,
            creator_id: ctx.actor?.memberId ?? null,
            project_id: lower(req.project_id) ?? null,
            section_id: lower(req.section_id) ?? null,
            status_id: lower(req.status_id) ?? null,
            ...due,
            deadline: req.deadline ?? null,
            start_date: req.start_date ?? null,
            rrule,
            ...rec,
            estimation_minutes: req.estimation_minutes ?? null,
            time_spent_minutes: req.time_spent_minutes ?? null,
            external_id: req.external_id?.trim() ?? null,
            identifier: req.identifier?.trim() ?? null,
            snoozed_until: req.snoozed_until ?? null,
            metadata: req.metadata ?? {},
          });
          await emit(tx, ctx, 'task.created', row);
          return toTask(row);
        },
        { signal: ctx.signal },
      );
    },

    async listTasks(req, ctx) {
      const page = parsePage(req);
      const v = validate();
      for (const f of ['parent_id', 'assignee_id', 'status_id', 'project_id'] as const) checkId(v, f, req[f]);
      v.check(!(req.parent_id && req.top_level), 'top_level', 'cannot be combined with parent_id').done();
      const listed = await tasks.listTasks(
        pool,
        ctx.tenant,
        {
          parentId: lower(req.parent_id) || undefined,
          topLevel: req.top_level,
          assigneeId: lower(req.assignee_id) || undefined,
          statusId: lower(req.status_id) || undefined,
          projectId: lower(req.project_id) || undefined,
          completed: req.completed,
          dueBefore: req.due_before,
          dueAfter: req.due_after,
          includeSnoozed: req.include_snoozed,
        },
        page,
      );
      return toPage(listed, toTask);
    },

    async getTask(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const row = await tasks.findTask(pool, ctx.tenant, req.id);
      if (!row) throw errors.notFound('task', req.id);
      return toTask(row);
    },

    async updateTask(req, ctx) {
      const v = validate().uuid('id', req.id, { required: true }).text('title', req.title, { max: LIMITS.taskTitle });
      checkTaskFields(v, req, true)
        .uuid('before_id', req.before_id)
        .uuid('after_id', req.after_id)
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

      // A text, id or date field: a value, '' or null (clear), or undefined (keep).
      const text = (f: Clearable, value: string | undefined, transform: (s: string) => string = (s) => s) =>
        clear.has(f) ? null : value === undefined ? undefined : value.trim() === '' ? null : transform(value.trim());
      const other = <T>(f: Clearable, value: T | undefined) => (clear.has(f) ? null : value);
      const patch = {
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
      const fieldsChanged = Object.values(patch).some((x) => x !== undefined);

      return withTransaction(
        pool,
        async (tx) => {
          if (moving) await tasks.lockTree(tx, tenantId, reparent ? 'exclusive' : 'shared');
          let current = await tasks.findTask(tx, tenantId, id, moving ? undefined : 'update');
          if (!current) throw errors.notFound('task', req.id);
          let moved: Record<string, unknown> | undefined;
          if (moving) {
            const from = { parent_id: current.parent_id, position: current.position };
            const target = reparent ? (!req.parent_id ? null : req.parent_id.toLowerCase()) : current.parent_id;
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
            current = (await tasks.findTask(tx, tenantId, id))!;
            const anchorField = anchor && 'before' in anchor ? 'before_id' : 'after_id';
            if (target === current.parent_id) {
              const order = place(oldIds, current.id, anchor);
              if (!order)
                throw errors.invalidField(anchorField, 'must be a live task under the same parent as the moved task');
              if (!sameOrder(order, oldIds)) await tasks.setPositions(tx, tenantId, order);
            } else {
              const newIds = await tasks.siblingIds(tx, tenantId, target, true);
              const order = place(newIds, current.id, anchor);
              if (!order)
                throw errors.invalidField(
                  anchorField,
                  `must be a live task under the new parent ${target ?? '(top level)'}`,
                );
              await tasks.setPositions(
                tx,
                tenantId,
                oldIds.filter((x) => x !== current!.id),
              );
              await tasks.updateTask(tx, tenantId, current.id, { parent_id: target });
              await tasks.setPositions(tx, tenantId, order);
            }
            const after = (await tasks.findTask(tx, tenantId, id))!;
            if (after.parent_id !== from.parent_id || after.position !== from.position) {
              moved = {
                from_parent_id: from.parent_id,
                from_position: from.position,
                parent_id: after.parent_id,
                position: after.position,
              };
            }
            current = after;
          }
          let row = current;
          if (fieldsChanged) {
            const touchesRecurrence =
              patch.rrule !== undefined || patch.due_at !== undefined || patch.due_date !== undefined;
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
    },

    async deleteTask(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const tenantId = ctx.tenant;
      const id = req.id.toLowerCase();
      return withTransaction(
        pool,
        async (tx) => {
          // Exclusive: no subtask can be created under, or moved into, the subtree meanwhile.
          await tasks.lockTree(tx, tenantId, 'exclusive');
          const current = await tasks.findTask(tx, tenantId, id);
          if (!current) throw errors.notFound('task', req.id);
          await tasks.lockSiblingSets(tx, tenantId, [current.parent_id]);
          const below = await tasks.descendantIds(tx, tenantId, id);
          await tasks.lockTasks(tx, tenantId, [id, ...below]);
          const deleted = await tasks.softDelete(tx, tenantId, [id, ...below]);
          await tasks.setPositions(tx, tenantId, await tasks.siblingIds(tx, tenantId, current.parent_id, true));
          const root = deleted.find((r) => r.id === id)!;
          await emit(tx, ctx, 'task.deleted', root, {
            deleted_at: root.deleted_at,
            deleted_subtasks: deleted.length - 1,
          });
          for (const r of deleted)
            if (r.id !== id) await emit(tx, ctx, 'task.deleted', r, { deleted_at: r.deleted_at, deleted_with: id });
          return {};
        },
        { signal: ctx.signal },
      );
    },

    async listSubtasks(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const parent = await tasks.findTask(pool, ctx.tenant, req.id);
      if (!parent) throw errors.notFound('task', req.id);
      return { data: (await tasks.children(pool, ctx.tenant, parent.id)).map(toTask) };
    },

    async completeTask(req, ctx) {
      const v = validate().uuid('id', req.id, { required: true });
      const occurrence = req.occurrence;
      if (occurrence !== undefined && !isIsoDate(occurrence) && !parseTimestamp(occurrence)) {
        v.add(
          'occurrence',
          'must be the due_at (RFC 3339) or due_date (YYYY-MM-DD) of the occurrence completed, as read from the task',
        );
      }
      v.done();
      const tenantId = ctx.tenant;
      const id = req.id.toLowerCase();
      return withTransaction(
        pool,
        async (tx) => {
          await tasks.lockTree(tx, tenantId, 'shared');
          if (!(await tasks.findTask(tx, tenantId, id))) throw errors.notFound('task', req.id);
          // The task and its subtasks, locked together in id order.
          const below = await tasks.descendantIds(tx, tenantId, id);
          const locked = await tasks.lockTasks(tx, tenantId, [id, ...below]);
          const current = locked.get(id);
          if (!current) throw errors.notFound('task', req.id);
          if (current.completed_at) return toTask(current); // completed already: nothing to do

          if (current.rrule) {
            const due = dueOf(current);
            if (due) {
              if (occurrence !== undefined) {
                const given: Due | undefined =
                  due.kind === 'at'
                    ? parseTimestamp(occurrence)
                      ? { kind: 'at', at: parseTimestamp(occurrence)! }
                      : undefined
                    : isIsoDate(occurrence)
                      ? { kind: 'date', date: occurrence }
                      : undefined;
                if (!given)
                  throw errors.invalidField(
                    'occurrence',
                    `must be the task's ${due.kind === 'at' ? 'due_at (RFC 3339)' : 'due_date (YYYY-MM-DD)'}`,
                  );
                const cmp = compareDue(given, due);
                // An earlier occurrence was completed already (a retry): the task stays as it is.
                if (cmp < 0) return toTask(current);
                if (cmp > 0) {
                  throw errors.failedPrecondition(
                    'OCCURRENCE_NOT_CURRENT',
                    `occurrence ${occurrence} is not due yet: the current occurrence is ${dueJson(due)}`,
                  );
                }
              }
              const anchor = current.rrule_anchor ?? dueInstant(due);
              const nextDue = occurrenceToComplete(current.rrule, anchor, due);
              if (nextDue) {
                const after = occurrenceToComplete(current.rrule, anchor, nextDue);
                const row = await tasks.updateTask(tx, tenantId, id, {
                  ...(nextDue.kind === 'at' ? { due_at: nextDue.at } : { due_date: nextDue.date }),
                  next_occurrence: after ? dueInstant(after) : null,
                });
                await emit(tx, ctx, 'task.completed', row, {
                  recurring: true,
                  occurrence: dueJson(due),
                  next_due: dueJson(nextDue),
                });
                return toTask(row);
              }
              // The series ends with this occurrence: the task completes.
            }
          }
          const done = await tasks.completeOpen(tx, tenantId, [id, ...below]);
          const row = done.find((r) => r.id === id)!;
          await emit(tx, ctx, 'task.completed', row, {
            completed_at: row.completed_at,
            completed_subtasks: done.length - 1,
          });
          for (const r of done)
            if (r.id !== id)
              await emit(tx, ctx, 'task.completed', r, { completed_at: r.completed_at, completed_with: id });
          return toTask(row);
        },
        { signal: ctx.signal },
      );
    },

    async reopenTask(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const tenantId = ctx.tenant;
      return withTransaction(
        pool,
        async (tx) => {
          const current = await tasks.findTask(tx, tenantId, req.id, 'update');
          if (!current) throw errors.notFound('task', req.id);
          if (!current.completed_at) return toTask(current);
          const row = await tasks.updateTask(tx, tenantId, current.id, { completed_at: null });
          await emit(tx, ctx, 'task.reopened', row, { completed_at: null });
          return toTask(row);
        },
        { signal: ctx.signal },
      );
    },
  };
}
