import { errors, parsePage, toPage } from '@workauto/grpc';
import * as notes from '../../repo/notes.js';
import { LIMITS, entityTypes, tagKey, toNote, type NotesTasksDeps, type Handler } from '../common.js';

export function listNotes(deps: NotesTasksDeps): Handler<'listNotes'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const page = parsePage(req);
    const q = req.q?.trim();
    const tag = req.tag?.trim();
    const listed = await notes.listNotes(
      pool,
      ctx.tenant,
      {
        q: q || undefined,
        tagKey: tag ? tagKey(tag) : undefined,
        tagId: req.tag_id || undefined,
        archived: req.archived,
        pinned: req.pinned,
        notebookId: req.notebook_id || undefined,
      },
      page,
    );
    return toPage(listed, toNote);
  };
}

export function getNote(deps: NotesTasksDeps): Handler<'getNote'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const row = await notes.findNote(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('note', req.id);
    return toNote(row);
  };
}

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
