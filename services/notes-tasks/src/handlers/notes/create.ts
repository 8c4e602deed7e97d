import { newId, withTransaction } from '@workauto/db';
import { textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { mentionTargets } from '../../domain/mentions.js';
import { wordCount } from '../../domain/words.js';
import { addLinks } from '../../repo/links.js';
import * as notes from '../../repo/notes.js';
import { SOURCE, noteData, toNote, type NotesTasksDeps, type Handler } from '../common.js';

export function createNote(deps: NotesTasksDeps): Handler<'createNote'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const row = await notes.insertNote(tx, {
          id: newId(),
          tenant_id: tenantId,
          title: req.title.trim(),
          body: req.body,
          is_archived: req.is_archived ?? false,
          is_pinned: req.is_pinned ?? false,
          metadata: req.metadata ?? {},
          notebook_id: req.notebook_id ? req.notebook_id.toLowerCase() : null,
          source_url: textOrNull(req.source_url) ?? null,
          word_count: wordCount(req.body),
        });
        const mentions = mentionTargets(row.body);
        await addLinks(tx, tenantId, row.id, mentions);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'note.created',
          resourceType: 'note',
          resourceId: row.id,
          data: noteData(row),
          metadata: { mentions: mentions.length },
        });
        return toNote(row);
      },
      { signal: ctx.signal },
    );
  };
}
