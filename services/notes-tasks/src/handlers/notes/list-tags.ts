import { errors } from '@workauto/grpc';
import * as notes from '../../repo/notes.js';
import * as tags from '../../repo/tags.js';
import { toTag, type NotesTasksDeps, type Handler } from '../common.js';

export function listNoteTags(deps: NotesTasksDeps): Handler<'listNoteTags'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const note = await notes.findNote(pool, ctx.tenant, req.id);
    if (!note) throw errors.notFound('note', req.id);
    return { data: (await tags.tagsOfNote(pool, ctx.tenant, note.id)).map(toTag) };
  };
}
