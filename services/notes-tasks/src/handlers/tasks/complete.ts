import { withTransaction, type PoolClient } from '@workauto/db';
import { errors, isIsoDate, validate, type CallContext } from '@workauto/grpc';
import { parseTimestamp } from '../../domain/dates.js';
import { RecurrenceLimitError, compareDue, dueInstant, nextOccurrence, type Due } from '../../domain/recurrence.js';
import * as tasks from '../../repo/tasks.js';
import type { TaskRow } from '../../repo/tasks.js';
import { toTask, type Handler, type NotesTasksDeps } from '../common.js';
import { dueOf, emit } from './common.js';

const dueJson = (d: Due) => (d.kind === 'at' ? d.at.toISOString() : d.date);

/**
 * Completes the current occurrence `due` of a recurring task: the task moves to its next
 * occurrence, and is returned; undefined when the series ends here. A completion naming an
 * earlier occurrence (a retry) leaves the task as it is; one naming a later one is a 409.
 */
async function completeOccurrence(
  tx: PoolClient,
  ctx: CallContext,
  current: TaskRow,
  due: Due,
  occurrence: string | undefined,
): Promise<TaskRow | undefined> {
  if (occurrence !== undefined) {
    const cmp = compareDue(givenOccurrence(occurrence, due), due);
    if (cmp < 0) return current;
    if (cmp > 0) {
      throw errors.failedPrecondition(
        'OCCURRENCE_NOT_CURRENT',
        `occurrence ${occurrence} is not due yet: the current occurrence is ${dueJson(due)}`,
      );
    }
  }
  const rrule = current.rrule!;
  const anchor = current.rrule_anchor ?? dueInstant(due);
  const nextDue = occurrenceToComplete(rrule, anchor, due);
  if (!nextDue) return undefined;
  const after = occurrenceToComplete(rrule, anchor, nextDue);
  const row = await tasks.updateTask(tx, ctx.tenant, current.id, {
    ...(nextDue.kind === 'at' ? { due_at: nextDue.at } : { due_date: nextDue.date }),
    next_occurrence: after ? dueInstant(after) : null,
  });
  await emit(tx, ctx, 'task.completed', row, {
    recurring: true,
    occurrence: dueJson(due),
    next_due: dueJson(nextDue),
  });
  return row;
}

/** The `occurrence` a completion names, read as the kind of the task's due; a 400 when it is the other kind. */
function givenOccurrence(occurrence: string, due: Due): Due {
  const at = parseTimestamp(occurrence);
  const given: Due | undefined =
    due.kind === 'at'
      ? at
        ? { kind: 'at', at }
        : undefined
      : isIsoDate(occurrence)
        ? { kind: 'date', date: occurrence }
        : undefined;
  if (!given)
    throw errors.invalidField(
      'occurrence',
      `must be the task's ${due.kind === 'at' ? 'due_at (RFC 3339)' : 'due_date (YYYY-MM-DD)'}`,
    );
  return given;
}

/**
 * nextOccurrence at completion: a rule that finds none within its evaluation limits is a 409 the
 * client resolves by changing the rule.
 */
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

export function completeTask({ pool }: NotesTasksDeps): Handler<'completeTask'> {
  return async (req, ctx) => {
    const v = validate();
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
        const due = current.rrule ? dueOf(current) : undefined;
        if (due) {
          const next = await completeOccurrence(tx, ctx, current, due, occurrence);
          if (next) return toTask(next);
          // The series ends with this occurrence: the task completes.
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
  };
}
