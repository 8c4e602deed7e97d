import { parsePage, toPage } from '@workauto/grpc';
import * as tags from '../../repo/tags.js';
import { toTag, type NotesTasksDeps, type Handler } from '../common.js';

export function listTags(deps: NotesTasksDeps): Handler<'listTags'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const page = parsePage(req);
    const listed = await tags.listTags(pool, ctx.tenant, page);
    return toPage(listed, toTag);
  };
}
