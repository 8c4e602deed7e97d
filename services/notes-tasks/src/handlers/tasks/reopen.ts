import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import * as tasks from '../../repo/tasks.js';
import { toTask, type Handler, type NotesTasksDeps } from '../common.js';
import { emit } from './common.js';

export function reopenTask({ pool }: NotesTasksDeps): Handler<'reopenTask'> {
  return async (req, ctx) => {
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
  };
}
