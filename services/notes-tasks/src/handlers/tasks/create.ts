import { newId, withTransaction } from '@workauto/db';
import { errors, textOrNull, validate } from '@workauto/grpc';
import type { Priority } from '../../domain/priority.js';
import { normalizeRrule } from '../../domain/recurrence.js';
import * as tasks from '../../repo/tasks.js';
import { priorities, toTask, type Handler, type NotesTasksDeps } from '../common.js';
import { assertRoomForSubtask, checkTaskFields, emit, lower, recurrence } from './common.js';

export function createTask({ pool }: NotesTasksDeps): Handler<'createTask'> {
  return async (req, ctx) => {
    checkTaskFields(validate(), req, false).done();
    const tenantId = ctx.tenant;
    const parentId = lower(req.parent_id) ?? null;
    const rrule = req.rrule === undefined ? null : normalizeRrule(req.rrule);
    const due = { due_at: req.due_at ?? null, due_date: req.due_date ?? null };
    const rec = recurrence(rrule, due);
    return withTransaction(
      pool,
      async (tx) => {
        await tasks.lockForCreate(tx, tenantId, parentId);
        let position: number | undefined; // a top-level task's is read by its insert
        if (parentId) {
          if (!(await tasks.findTask(tx, tenantId, parentId)))
            throw errors.invalidField('parent_id', `no task ${parentId} in this tenant`);
          const next = await tasks.nextChildPosition(tx, tenantId, parentId);
          assertRoomForSubtask(next.live);
          position = next.position;
        }
        const row = await tasks.insertTask(tx, {
          id: newId(),
          tenant_id: tenantId,
          parent_id: parentId,
          title: req.title.trim(),
          description: textOrNull(req.description) ?? null,
          position,
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
  };
}
