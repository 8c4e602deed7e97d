import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as notes from '../../repo/notes.js';
import * as tags from '../../repo/tags.js';
import { SOURCE, noteData, type NotesTasksDeps, type Handler } from '../common.js';

export function removeNoteTag(deps: NotesTasksDeps): Handler<'removeNoteTag'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const note = await notes.findNote(tx, tenantId, req.id, 'share');
        if (!note) throw errors.notFound('note', req.id);
        const tag = await tags.detach(tx, tenantId, note.id, req.tag_id);
        if (!tag) throw errors.notFound('note_tag', req.tag_id);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'note.untagged',
          resourceType: 'note',
          resourceId: note.id,
          data: noteData(note),
          metadata: { tag_id: tag.id, tag_name: tag.name },
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
