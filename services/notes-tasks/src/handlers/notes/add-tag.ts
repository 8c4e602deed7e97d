import { newId, withTransaction } from '@workauto/db';
import { errors, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as notes from '../../repo/notes.js';
import * as tags from '../../repo/tags.js';
import { LIMITS, SOURCE, noteData, tagData, tagKey, toTag, type NotesTasksDeps, type Handler } from '../common.js';

/** Control characters (a tag name is one line of text). */
// eslint-disable-next-line no-control-regex -- matching control characters is the point: they are refused
const CONTROL = /[\u0000-\u001f\u007f]/;

export function addNoteTag(deps: NotesTasksDeps): Handler<'addNoteTag'> {
  const { pool } = deps;
  return async (req, ctx) => {
    validate().check(!CONTROL.test(req.name), 'name', 'must be one line of text without control characters').done();
    const tenantId = ctx.tenant;
    const name = req.name.trim().normalize('NFC');
    return withTransaction(
      pool,
      async (tx) => {
        // A share lock: the note cannot be deleted meanwhile; attaches to it do not wait on each other.
        const note = await notes.findNote(tx, tenantId, req.id, 'share');
        if (!note) throw errors.notFound('note', req.id);
        // Before the tag is made: a full note gets no new tag either.
        if (!(await tags.roomFor(tx, tenantId, note.id, tagKey(name), LIMITS.tagsPerNote)))
          throw errors.failedPrecondition(
            'TOO_MANY_TAGS',
            `a note has at most ${LIMITS.tagsPerNote} tags; remove one (DELETE /notes/{id}/tags/{tag_id}) before adding another`,
          );
        const { tag, created } = await tags.upsertTag(tx, {
          id: newId(),
          tenant_id: tenantId,
          name,
          name_key: tagKey(name),
        });
        if (created)
          await recordEvent(tx, SOURCE, ctx, {
            type: 'tag.created',
            resourceType: 'tag',
            resourceId: tag.id,
            data: tagData(tag),
          });
        if (await tags.attach(tx, tenantId, note.id, tag.id)) {
          await recordEvent(tx, SOURCE, ctx, {
            type: 'note.tagged',
            resourceType: 'note',
            resourceId: note.id,
            data: noteData(note),
            metadata: { tag_id: tag.id, tag_name: tag.name },
          });
        }
        return toTag(tag);
      },
      { signal: ctx.signal },
    );
  };
}
