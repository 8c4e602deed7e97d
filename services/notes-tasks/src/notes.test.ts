import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { EntityType } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { S, badFields, failure, startNotesTasks, tenant, type NotesTasks } from './test-support.js';

describe('notes over gRPC', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  it('creates a note with every field, computes word_count, and reads it back', async () => {
    const t = tenant();
    const notebook = randomUUID();
    const n = await nt.client.call(
      S.createNote,
      {
        title: '  Kickoff  ',
        body: 'Agenda: budget, timeline and **risks**.',
        is_pinned: true,
        notebook_id: notebook,
        source_url: 'https://example.com/doc',
        metadata: { k: 1 },
      },
      t.call,
    );
    assert.deepEqual(
      [
        n.title,
        n.body,
        n.is_pinned,
        n.is_archived,
        n.notebook_id,
        n.source_url,
        n.word_count,
        n.metadata,
        n.tenant_id,
        n.deleted_at,
      ],
      [
        'Kickoff',
        'Agenda: budget, timeline and **risks**.',
        true,
        false,
        notebook,
        'https://example.com/doc',
        5,
        { k: 1 },
        t.id,
        undefined,
      ],
    );
    assert.ok(n.created_at instanceof Date && n.updated_at instanceof Date);
    const got = await nt.client.call(S.getNote, { id: n.id }, t.call);
    assert.deepEqual(got, n);
    const untitled = await nt.client.call(S.createNote, { title: '', body: '', notebook_id: '' }, t.call);
    assert.deepEqual(
      [untitled.title, untitled.body, untitled.word_count, untitled.metadata, untitled.notebook_id],
      ['', '', 0, {}, undefined],
    );
    assert.deepEqual(await nt.events(t.id), ['note.created', 'note.created']);
  });

  it('patches fields, recomputes word_count on a new body, clears with empty strings', async () => {
    const t = tenant();
    const n = await nt.client.call(
      S.createNote,
      { title: 'Draft', body: 'one two', notebook_id: randomUUID(), source_url: 'http://a.example' },
      t.call,
    );
    const p = await nt.client.call(
      S.updateNote,
      { id: n.id, body: 'one two three four', is_archived: true, notebook_id: '', source_url: '' },
      t.call,
    );
    assert.deepEqual(
      [p.word_count, p.is_archived, p.notebook_id, p.source_url, p.title],
      [4, true, undefined, undefined, 'Draft'],
    );
    assert.ok(p.updated_at! > n.updated_at!);
    const renamed = await nt.client.call(S.updateNote, { id: n.id, title: 'Final', metadata: { v: 2 } }, t.call);
    assert.deepEqual([renamed.title, renamed.word_count, renamed.metadata], ['Final', 4, { v: 2 }]);
    assert.deepEqual(
      await nt.client.call(S.updateNote, { id: n.id }, t.call),
      renamed,
      'an empty patch changes nothing',
    );
    assert.deepEqual(await nt.events(t.id), ['note.created', 'note.updated', 'note.updated']);
  });

  it('soft-deletes: 404 on every by-id call afterwards, gone from lists', async () => {
    const t = tenant();
    const n = await nt.client.call(S.createNote, { title: 'Temp', body: '' }, t.call);
    await nt.client.call(S.deleteNote, { id: n.id }, t.call);
    for (const call of [
      () => nt.client.call(S.getNote, { id: n.id }, t.call),
      () => nt.client.call(S.updateNote, { id: n.id, title: 'x' }, t.call),
      () => nt.client.call(S.deleteNote, { id: n.id }, t.call),
      () => nt.client.call(S.addNoteTag, { id: n.id, name: 'x' }, t.call),
      () => nt.client.call(S.listNoteTags, { id: n.id }, t.call),
    ]) {
      const err = await failure(call());
      assert.deepEqual([err.code, err.reason], [grpc.status.NOT_FOUND, 'NOTE_NOT_FOUND']);
    }
    assert.deepEqual((await nt.client.call(S.listNotes, {}, t.call)).data, []);
    const { rows } = await nt.db.query('SELECT deleted_at FROM notes WHERE id = $1', [n.id]);
    assert.ok(rows[0].deleted_at, 'the row stays, soft-deleted');
  });

  it('lists newest first with a cursor and filters by archived, pinned, q and tag', async () => {
    const t = tenant();
    const a = await nt.client.call(S.createNote, { title: 'Alpha plan', body: 'budget 100%' }, t.call);
    const b = await nt.client.call(
      S.createNote,
      { title: 'Beta', body: 'Mentions the ALPHA launch', is_pinned: true },
      t.call,
    );
    const c = await nt.client.call(S.createNote, { title: 'Gamma', body: 'nothing', is_archived: true }, t.call);
    const page1 = await nt.client.call(S.listNotes, { limit: 2 }, t.call);
    assert.deepEqual([page1.data.map((n) => n.id), page1.has_more], [[c.id, b.id], true]);
    const page2 = await nt.client.call(S.listNotes, { limit: 2, cursor: page1.next_cursor! }, t.call);
    assert.deepEqual([page2.data.map((n) => n.id), page2.has_more, page2.next_cursor], [[a.id], false, undefined]);
    const ids = async (req: object) => (await nt.client.call(S.listNotes, req, t.call)).data.map((n) => n.id);
    assert.deepEqual(await ids({ archived: true }), [c.id]);
    assert.deepEqual(await ids({ archived: false }), [b.id, a.id]);
    assert.deepEqual(await ids({ pinned: true }), [b.id]);
    assert.deepEqual(await ids({ q: 'alpha' }), [b.id, a.id]);
    assert.deepEqual(await ids({ q: '100%' }), [a.id]);
    assert.deepEqual(await ids({ q: '%' }), [a.id], 'a % in q matches itself, not anything');
    await nt.client.call(S.addNoteTag, { id: a.id, name: 'Work' }, t.call);
    const tagged = await nt.client.call(S.addNoteTag, { id: c.id, name: 'work' }, t.call);
    assert.deepEqual(await ids({ tag: 'WORK' }), [c.id, a.id]);
    assert.deepEqual(await ids({ tag_id: tagged.id, archived: false }), [a.id]);
    assert.deepEqual(await ids({ tag: 'nope' }), []);
  });

  it('refuses bad input with field violations', async () => {
    const t = tenant();
    const n = await nt.client.call(S.createNote, { title: 'x', body: '' }, t.call);
    assert.deepEqual(await badFields(nt.client.call(S.createNote, { title: 'x'.repeat(501), body: '' }, t.call)), [
      'title',
    ]);
    assert.deepEqual(await badFields(nt.client.call(S.createNote, { title: 'x', body: 'y'.repeat(100_001) }, t.call)), [
      'body',
    ]);
    assert.deepEqual(
      await badFields(
        nt.client.call(S.createNote, { title: 'x', body: '', source_url: 'ftp://x', notebook_id: 'nb-1' }, t.call),
      ),
      ['notebook_id', 'source_url'],
    );
    assert.deepEqual(
      await badFields(
        nt.client.call(S.createNote, { title: 'x', body: '', metadata: { big: 'z'.repeat(20_000) } }, t.call),
      ),
      ['metadata'],
    );
    // A URL parser drops a tab or a line break and still accepts the URL; the stored text would keep it.
    for (const source_url of ['https://a.example/x\r\nSet-Cookie: y', 'https://a.example/\tx', 'https://a .example'])
      assert.deepEqual(
        await badFields(nt.client.call(S.updateNote, { id: n.id, source_url }, t.call)),
        ['source_url'],
        JSON.stringify(source_url),
      );
    const trimmed = await nt.client.call(S.updateNote, { id: n.id, source_url: '  https://a.example/x  ' }, t.call);
    assert.equal(trimmed.source_url, 'https://a.example/x');
    assert.deepEqual(await badFields(nt.client.call(S.updateNote, { id: n.id, title: 'x'.repeat(501) }, t.call)), [
      'title',
    ]);
    assert.deepEqual(await badFields(nt.client.call(S.getNote, { id: 'nope' }, t.call)), ['id']);
    assert.deepEqual(await badFields(nt.client.call(S.listNotes, { limit: 0 }, t.call)), ['limit']);
    assert.deepEqual(await badFields(nt.client.call(S.listNotes, { q: 'q'.repeat(201) }, t.call)), ['q']);
    const unauth = await failure(nt.client.call(S.listNotes, {}));
    assert.equal(unauth.code, grpc.status.UNAUTHENTICATED);
  });
});

describe('tags over gRPC', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  it('attaches by name case-insensitively, creating the tag once; attaching twice is harmless', async () => {
    const t = tenant();
    const n1 = await nt.client.call(S.createNote, { title: 'one', body: '' }, t.call);
    const n2 = await nt.client.call(S.createNote, { title: 'two', body: '' }, t.call);
    const tag = await nt.client.call(S.addNoteTag, { id: n1.id, name: '  Ünïcode Tag ' }, t.call);
    assert.deepEqual(
      [tag.name, tag.tenant_id, tag.metadata, tag.color, tag.description],
      ['Ünïcode Tag', t.id, {}, undefined, undefined],
    );
    const again = await nt.client.call(S.addNoteTag, { id: n1.id, name: 'üNÏCODE tag' }, t.call);
    assert.deepEqual(again, tag, 'the same tag back, name as first written');
    const other = await nt.client.call(S.addNoteTag, { id: n2.id, name: 'ÜNÏCODE TAG' }, t.call);
    assert.equal(other.id, tag.id);
    await nt.client.call(S.addNoteTag, { id: n1.id, name: 'b-second' }, t.call);
    assert.deepEqual(
      (await nt.client.call(S.listNoteTags, { id: n1.id }, t.call)).data.map((x) => x.name),
      ['b-second', 'Ünïcode Tag'],
    );
    const all = await nt.client.call(S.listTags, {}, t.call);
    assert.deepEqual(
      all.data.map((x) => x.name),
      ['b-second', 'Ünïcode Tag'],
    );
    const attachments = await nt.db.query('SELECT count(*)::int AS n FROM note_tags WHERE note_id = $1', [n1.id]);
    assert.equal(attachments.rows[0].n, 2);
    assert.deepEqual(await nt.events(t.id), [
      'note.created',
      'note.created',
      'tag.created',
      'note.tagged',
      'note.tagged',
      'tag.created',
      'note.tagged',
    ]);
  });

  it('detaches (404 when not attached) and keeps the tag', async () => {
    const t = tenant();
    const n = await nt.client.call(S.createNote, { title: 'n', body: '' }, t.call);
    const tag = await nt.client.call(S.addNoteTag, { id: n.id, name: 'ops' }, t.call);
    await nt.client.call(S.removeNoteTag, { id: n.id, tag_id: tag.id }, t.call);
    assert.deepEqual((await nt.client.call(S.listNoteTags, { id: n.id }, t.call)).data, []);
    const err = await failure(nt.client.call(S.removeNoteTag, { id: n.id, tag_id: tag.id }, t.call));
    assert.deepEqual([err.code, err.reason], [grpc.status.NOT_FOUND, 'NOTE_TAG_NOT_FOUND']);
    assert.deepEqual(
      (await nt.client.call(S.listTags, {}, t.call)).data.map((x) => x.id),
      [tag.id],
    );
    assert.equal((await nt.events(t.id)).at(-1), 'note.untagged');
  });

  it('checks names: trimmed, 1 to 64 characters, one line', async () => {
    const t = tenant();
    const n = await nt.client.call(S.createNote, { title: 'n', body: '' }, t.call);
    for (const name of ['', '   ', 'x'.repeat(65), 'two\nlines']) {
      assert.deepEqual(
        await badFields(nt.client.call(S.addNoteTag, { id: n.id, name }, t.call)),
        ['name'],
        JSON.stringify(name),
      );
    }
    assert.equal(
      (await nt.client.call(S.addNoteTag, { id: n.id, name: ` ${'x'.repeat(64)} ` }, t.call)).name.length,
      64,
    );
  });

  it('20 parallel attaches of one new name end with one tag and one attachment', async () => {
    const t = tenant();
    const n = await nt.client.call(S.createNote, { title: 'race', body: '' }, t.call);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        nt.client.call(S.addNoteTag, { id: n.id, name: i % 2 ? 'Urgent' : 'URGENT' }, t.call),
      ),
    );
    assert.equal(new Set(results.map((r) => r.id)).size, 1);
    const tags = await nt.db.query('SELECT id FROM tags WHERE tenant_id = $1', [t.id]);
    assert.equal(tags.rows.length, 1);
    const links = await nt.db.query('SELECT tag_id FROM note_tags WHERE note_id = $1', [n.id]);
    assert.deepEqual(
      links.rows.map((r) => r.tag_id),
      [results[0]!.id],
    );
    const events = await nt.events(t.id);
    assert.deepEqual(
      [events.filter((e) => e === 'tag.created').length, events.filter((e) => e === 'note.tagged').length],
      [1, 1],
    );
  });

  it('keeps tenants apart: same names are different tags, and another tenant’s note is a 404', async () => {
    const a = tenant();
    const b = tenant();
    const na = await nt.client.call(S.createNote, { title: 'a', body: '' }, a.call);
    const nb = await nt.client.call(S.createNote, { title: 'b', body: '' }, b.call);
    const ta = await nt.client.call(S.addNoteTag, { id: na.id, name: 'shared' }, a.call);
    const tb = await nt.client.call(S.addNoteTag, { id: nb.id, name: 'shared' }, b.call);
    assert.notEqual(ta.id, tb.id);
    assert.equal(
      (await failure(nt.client.call(S.addNoteTag, { id: na.id, name: 'x' }, b.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.equal(
      (await failure(nt.client.call(S.removeNoteTag, { id: nb.id, tag_id: ta.id }, b.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.deepEqual(
      (await nt.client.call(S.listTags, {}, b.call)).data.map((x) => x.id),
      [tb.id],
    );
  });
});

describe('backlinks over gRPC', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  const links = async (t: ReturnType<typeof tenant>, entity_type: EntityType, entity_id: string) =>
    (await nt.client.call(S.listBacklinks, { entity_type, entity_id }, t.call)).data.map((n) => n.title);

  it('indexes mentions on create, replaces them on update, removes them on delete', async () => {
    const t = tenant();
    const contact = randomUUID();
    const deal = randomUUID();
    const n1 = await nt.client.call(
      S.createNote,
      { title: 'n1', body: `Met [[contact:${contact}|Dana]] about [[deal:${deal}]].` },
      t.call,
    );
    const n2 = await nt.client.call(
      S.createNote,
      { title: 'n2', body: `Follow up with [[contact:${contact.toUpperCase()}]]` },
      t.call,
    );
    await nt.client.call(
      S.createNote,
      { title: 'n3', body: `code only: \`[[contact:${contact}]]\`\n\`\`\`\n[[contact:${contact}]]\n\`\`\`` },
      t.call,
    );
    assert.deepEqual(await links(t, EntityType.ENTITY_TYPE_CONTACT, contact), ['n2', 'n1']);
    assert.deepEqual(await links(t, EntityType.ENTITY_TYPE_DEAL, deal), ['n1']);
    assert.deepEqual(await links(t, EntityType.ENTITY_TYPE_TASK, contact), [], 'the type is part of the key');

    // Most recently updated first: touching n1 moves it ahead.
    await nt.client.call(S.updateNote, { id: n1.id, title: 'n1 edited' }, t.call);
    assert.deepEqual(await links(t, EntityType.ENTITY_TYPE_CONTACT, contact), ['n1 edited', 'n2']);
    // A new body replaces the note's mentions.
    await nt.client.call(S.updateNote, { id: n1.id, body: `only the deal now: [[deal:${deal}]]` }, t.call);
    assert.deepEqual(await links(t, EntityType.ENTITY_TYPE_CONTACT, contact), ['n2']);
    assert.deepEqual(await links(t, EntityType.ENTITY_TYPE_DEAL, deal), ['n1 edited']);
    await nt.client.call(S.deleteNote, { id: n2.id }, t.call);
    assert.deepEqual(await links(t, EntityType.ENTITY_TYPE_CONTACT, contact), []);
    const rows = await nt.db.query('SELECT count(*)::int AS n FROM note_links WHERE note_id = $1', [n2.id]);
    assert.equal(rows.rows[0].n, 0, 'a deleted note leaves the index');
  });

  it('never shows another tenant’s notes, and refuses an unknown type or a bad id', async () => {
    const a = tenant();
    const b = tenant();
    const task = randomUUID();
    await nt.client.call(S.createNote, { title: 'alpha only', body: `[[task:${task}]]` }, a.call);
    assert.deepEqual(await links(a, EntityType.ENTITY_TYPE_TASK, task), ['alpha only']);
    assert.deepEqual(await links(b, EntityType.ENTITY_TYPE_TASK, task), []);
    assert.deepEqual(
      await badFields(
        nt.client.call(S.listBacklinks, { entity_type: EntityType.ENTITY_TYPE_UNSPECIFIED, entity_id: task }, a.call),
      ),
      ['entity_type'],
    );
    assert.deepEqual(
      await badFields(nt.client.call(S.listBacklinks, { entity_type: 99 as EntityType, entity_id: 'x' }, a.call)),
      ['entity_type', 'entity_id'],
    );
  });
});
