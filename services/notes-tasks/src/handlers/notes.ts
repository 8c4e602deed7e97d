import { newId, withTransaction } from '@workauto/db';
import {
  errors,
  parsePage,
  toPage,
  validate,
  type Handlers,
  patchNulls,
  changedFields,
  checkEnum,
  checkMetadata,
  textOrNull,
  checkId,
} from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { NotesTasksServiceService } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { mentionTargets } from '../domain/mentions.js';
import { wordCount } from '../domain/words.js';
import { replaceLinks } from '../repo/links.js';
import * as notes from '../repo/notes.js';
import * as tags from '../repo/tags.js';
import {
  LIMITS,
  SOURCE,
  entityTypes,
  noteData,
  tagData,
  tagKey,
  toNote,
  toTag,
  type NotesTasksDeps,
} from './common.js';
import { checkLength, checkUrl } from './validation.js';

type H = Handlers<typeof NotesTasksServiceService>;

/** Control characters (a tag name is one line of text). */
const CONTROL = /[\u0000-\u001f\u007f]/;

export function noteHandlers({
  pool,
}: NotesTasksDeps): Pick<
  H,
  | 'createNote'
  | 'listNotes'
  | 'getNote'
  | 'updateNote'
  | 'deleteNote'
  | 'addNoteTag'
  | 'listNoteTags'
  | 'removeNoteTag'
  | 'listTags'
  | 'listBacklinks'
> {
  return {
    async createNote(req, ctx) {
      const v = validate().text('title', req.title, { min: 0, max: LIMITS.noteTitle });
      checkLength(v, 'body', req.body, LIMITS.noteBody);
      checkId(v, 'notebook_id', req.notebook_id);
      checkUrl(v, 'source_url', req.source_url);
      checkMetadata(v, 'metadata', req.metadata).done();
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
            source_url: req.source_url?.trim() ?? null,
            word_count: wordCount(req.body),
          });
          const mentions = mentionTargets(row.body);
          await replaceLinks(tx, tenantId, row.id, mentions);
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
    },

    async listNotes(req, ctx) {
      const page = parsePage(req);
      const v = validate()
        .text('q', req.q, { min: 0, max: LIMITS.query })
        .text('tag', req.tag, { min: 0, max: LIMITS.tagName });
      checkId(v, 'tag_id', req.tag_id);
      checkId(v, 'notebook_id', req.notebook_id).done();
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
    },

    async getNote(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const row = await notes.findNote(pool, ctx.tenant, req.id);
      if (!row) throw errors.notFound('note', req.id);
      return toNote(row);
    },

    async updateNote(patchRequest, ctx) {
      const v = validate();
      const { req } = patchNulls(patchRequest, { text: ['title', 'body', 'notebook_id', 'source_url'] }, v);
      v.uuid('id', req.id, { required: true }).text('title', req.title, { min: 0, max: LIMITS.noteTitle });
      checkLength(v, 'body', req.body, LIMITS.noteBody);
      checkId(v, 'notebook_id', req.notebook_id, true);
      checkUrl(v, 'source_url', req.source_url, true);
      checkMetadata(v, 'metadata', req.metadata).done();
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
            notebook_id:
              req.notebook_id === undefined ? undefined : (textOrNull(req.notebook_id)?.toLowerCase() ?? null),
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
    },

    async deleteNote(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
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
    },

    async addNoteTag(req, ctx) {
      const v = validate()
        .uuid('id', req.id, { required: true })
        .text('name', req.name, { required: true, max: LIMITS.tagName });
      v.check(!CONTROL.test(req.name), 'name', 'must be one line of text without control characters').done();
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
    },

    async listNoteTags(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const note = await notes.findNote(pool, ctx.tenant, req.id);
      if (!note) throw errors.notFound('note', req.id);
      return { data: (await tags.tagsOfNote(pool, ctx.tenant, note.id)).map(toTag) };
    },

    async removeNoteTag(req, ctx) {
      validate().uuid('id', req.id, { required: true }).uuid('tag_id', req.tag_id, { required: true }).done();
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
    },

    async listTags(req, ctx) {
      const page = parsePage(req);
      const listed = await tags.listTags(pool, ctx.tenant, page);
      return toPage(listed, toTag);
    },

    async listBacklinks(req, ctx) {
      const v = validate();
      checkEnum(v, 'entity_type', req.entity_type, entityTypes, true);
      v.uuid('entity_id', req.entity_id, { required: true }).done();
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
    },
  };
}
