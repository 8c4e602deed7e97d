import * as notes from '../../repo/notes.js';
import { LIMITS, entityTypes, toNote, type NotesTasksDeps, type Handler } from '../common.js';

export function listBacklinks(deps: NotesTasksDeps): Handler<'listBacklinks'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const type = entityTypes.toDomain(req.entity_type)!;
    const rows = await notes.backlinks(
      pool,
      ctx.tenant,
      type,
      req.entity_id.toLowerCase(),
      LIMITS.backlinks,
      LIMITS.backlinkBytes,
    );
    return { data: rows.map(toNote) };
  };
}
