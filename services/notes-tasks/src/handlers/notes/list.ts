import { parsePage, toPage } from '@workauto/grpc';
import * as notes from '../../repo/notes.js';
import { tagKey, toNote, type NotesTasksDeps, type Handler } from '../common.js';

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
