import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { replaceLinks } from '../../repo/links.js';
import * as notes from '../../repo/notes.js';
import { SOURCE, noteData, type NotesTasksDeps, type Handler } from '../common.js';

export function deleteNote(deps: NotesTasksDeps): Handler<'deleteNote'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const current = await notes.findNote(tx, tenantId, req.id, 'update');
        if (!current) throw errors.notFound('note', req.id);
        const row = await notes.updateNote(tx, tenantId, current.id, { deleted_at: new Date() });
        await replaceLinks(tx, tenantId, row.id, []);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'note.deleted',
          resourceType: 'note',
          resourceId: row.id,
          data: noteData(row),
          metadata: { deleted_at: row.deleted_at },
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
