import { withTransaction } from '@workauto/db';
import { errors, validate, patchNulls, changedFields, textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { mentionTargets } from '../../domain/mentions.js';
import { wordCount } from '../../domain/words.js';
import { replaceLinks } from '../../repo/links.js';
import * as notes from '../../repo/notes.js';
import { SOURCE, noteData, toNote, type NotesTasksDeps, type Handler } from '../common.js';

export function updateNote(deps: NotesTasksDeps): Handler<'updateNote'> {
  const { pool } = deps;
  return async (patchRequest, ctx) => {
    const v = validate();
    const { req } = patchNulls(patchRequest, { text: ['title', 'body', 'notebook_id', 'source_url'] }, v);
    v.done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const current = await notes.findNote(tx, tenantId, req.id, 'update');
        if (!current) throw errors.notFound('note', req.id);
        const patch = {
          title: req.title?.trim(),
          body: req.body,
          is_archived: req.is_archived,
          is_pinned: req.is_pinned,
          metadata: req.metadata,
          notebook_id: req.notebook_id === undefined ? undefined : (textOrNull(req.notebook_id)?.toLowerCase() ?? null),
          source_url: textOrNull(req.source_url),
          word_count: req.body === undefined ? undefined : wordCount(req.body),
        };
        if (Object.values(patch).every((x) => x === undefined)) return toNote(current); // nothing to change
        const row = await notes.updateNote(tx, tenantId, current.id, patch);
        const { body: _body, ...rest } = patch;
        const metadata = changedFields(rest);
        if (req.body !== undefined) {
          // The index follows the body: mentions removed from it leave the entities' backlinks.
          const mentions = mentionTargets(row.body);
          await replaceLinks(tx, tenantId, row.id, mentions);
          Object.assign(metadata, { body_changed: row.body !== current.body, mentions: mentions.length });
        }
        await recordEvent(tx, SOURCE, ctx, {
          type: 'note.updated',
          resourceType: 'note',
          resourceId: row.id,
          data: noteData(row),
          metadata,
        });
        return toNote(row);
      },
      { signal: ctx.signal },
    );
  };
}
