import { errors } from '@workauto/grpc';
import * as tasks from '../../repo/tasks.js';
import { toTask, type Handler, type NotesTasksDeps } from '../common.js';

export function listSubtasks({ pool }: NotesTasksDeps): Handler<'listSubtasks'> {
  return async (req, ctx) => {
    const parent = await tasks.findTask(pool, ctx.tenant, req.id);
    if (!parent) throw errors.notFound('task', req.id);
    return { data: (await tasks.children(pool, ctx.tenant, parent.id)).map(toTask) };
  };
}
