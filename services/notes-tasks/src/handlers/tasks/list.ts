import { parsePage, toPage, validate } from '@workauto/grpc';
import * as tasks from '../../repo/tasks.js';
import { toTask, type Handler, type NotesTasksDeps } from '../common.js';
import { lower } from './common.js';

export function listTasks({ pool }: NotesTasksDeps): Handler<'listTasks'> {
  return async (req, ctx) => {
    const page = parsePage(req);
    validate()
      .check(!(req.parent_id && req.top_level), 'top_level', 'cannot be combined with parent_id')
      .done();
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
  };
}
