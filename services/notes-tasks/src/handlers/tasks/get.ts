import { errors } from '@workauto/grpc';
import * as tasks from '../../repo/tasks.js';
import { toTask, type Handler, type NotesTasksDeps } from '../common.js';

export function getTask({ pool }: NotesTasksDeps): Handler<'getTask'> {
  return async (req, ctx) => {
    const row = await tasks.findTask(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('task', req.id);
    return toTask(row);
  };
}
