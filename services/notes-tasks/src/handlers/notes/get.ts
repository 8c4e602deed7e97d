import { errors } from '@workauto/grpc';
import * as notes from '../../repo/notes.js';
import { toNote, type NotesTasksDeps, type Handler } from '../common.js';

export function getNote(deps: NotesTasksDeps): Handler<'getNote'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const row = await notes.findNote(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('note', req.id);
    return toNote(row);
  };
}
