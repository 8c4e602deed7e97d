import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import * as tasks from '../../repo/tasks.js';
import type { Handler, NotesTasksDeps } from '../common.js';
import { emit } from './common.js';

export function deleteTask({ pool }: NotesTasksDeps): Handler<'deleteTask'> {
  return async (req, ctx) => {
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
  };
}
