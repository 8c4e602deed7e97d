/**
 * What one request may hold of notes-tasks' memory: the lists that return bare arrays (a task's
 * subtasks, a note's tags, an entity's backlinks) have a bound on what they return, so no tenant
 * can make one request load hundreds of megabytes, or an answer too large to send.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { EntityType } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { S, failure, startNotesTasks, tenant, type NotesTasks } from './test-support.js';

describe('bounds of the bare-array lists', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  it('keeps a task to 1,000 live subtasks: one more is a 409, by create or by move, and a deleted one makes room', async () => {
    const t = tenant();
    const parent = await nt.client.call(S.createTask, { title: 'epic' }, t.call);
    // 999 seeded in SQL, the 1,000th through the API (positions dense 1..n, as the service keeps them).
    await nt.db.query(
      `INSERT INTO tasks (id, tenant_id, parent_id, title, position)
       SELECT gen_random_uuid(), $1, $2, 'step ' || i, i FROM generate_series(1, 999) AS i`,
      [t.id, parent.id],
    );
    const last = await nt.client.call(S.createTask, { title: 'step 1000', parent_id: parent.id }, t.call);
    assert.equal(last.position, 1_000);
    const over = await failure(nt.client.call(S.createTask, { title: 'one too many', parent_id: parent.id }, t.call));
    assert.deepEqual([over.code, over.reason], [grpc.status.FAILED_PRECONDITION, 'TOO_MANY_SUBTASKS']);
    assert.match(over.message, /1000|1,000/);
    const loose = await nt.client.call(S.createTask, { title: 'elsewhere' }, t.call);
    const moved = await failure(nt.client.call(S.updateTask, { id: loose.id, parent_id: parent.id }, t.call));
    assert.equal(moved.reason, 'TOO_MANY_SUBTASKS');
    assert.equal((await nt.client.call(S.listSubtasks, { id: parent.id }, t.call)).data.length, 1_000);
    await nt.client.call(S.deleteTask, { id: last.id }, t.call);
    const again = await nt.client.call(S.createTask, { title: 'room again', parent_id: parent.id }, t.call);
    assert.equal(again.position, 1_000);
  });

  it('keeps a note to 100 tags: one more is a 409, attaching one it has is still fine', async () => {
    const t = tenant();
    const note = await nt.client.call(S.createNote, { title: 'tagged', body: '' }, t.call);
    const first = await nt.client.call(S.addNoteTag, { id: note.id, name: 'tag 1' }, t.call);
    await nt.db.query(
      `WITH made AS (INSERT INTO tags (id, tenant_id, name, name_key)
                     SELECT gen_random_uuid(), $1, 'tag ' || i, 'tag ' || i FROM generate_series(2, 100) AS i RETURNING id)
       INSERT INTO note_tags (tenant_id, note_id, tag_id) SELECT $1, $2, id FROM made`,
      [t.id, note.id],
    );
    const over = await failure(nt.client.call(S.addNoteTag, { id: note.id, name: 'tag 101' }, t.call));
    assert.deepEqual([over.code, over.reason], [grpc.status.FAILED_PRECONDITION, 'TOO_MANY_TAGS']);
    assert.equal((await nt.client.call(S.addNoteTag, { id: note.id, name: 'TAG 1' }, t.call)).id, first.id);
    assert.equal((await nt.client.call(S.listNoteTags, { id: note.id }, t.call)).data.length, 100);
  });

  it('answers backlinks of notes with long bodies within the message limit: the most recent first, as many as fit', async () => {
    const t = tenant();
    const contact = randomUUID();
    // 20 notes of 100,000 three-byte characters (300 kB each, 6 MB in all) mention the contact.
    await nt.db.query(
      `WITH made AS (INSERT INTO notes (id, tenant_id, title, body, updated_at)
                     SELECT gen_random_uuid(), $1, 'long ' || i, repeat('€', 99950) || ' [[contact:' || $2::text || ']]',
                            now() - i * interval '1 minute'
                       FROM generate_series(1, 20) AS i RETURNING id)
       INSERT INTO note_links (tenant_id, note_id, entity_type, entity_id) SELECT $1, id, 'contact', $2::uuid FROM made`,
      [t.id, contact],
    );
    const { data } = await nt.client.call(
      S.listBacklinks,
      { entity_type: EntityType.ENTITY_TYPE_CONTACT, entity_id: contact },
      t.call,
    );
    assert.ok(data.length >= 5 && data.length < 20, `${data.length} of the 20 notes: as many as fit in about 3 MiB`);
    assert.deepEqual(
      data.map((n) => n.title),
      Array.from({ length: data.length }, (_, i) => `long ${i + 1}`),
      'the most recently updated first, none skipped',
    );
    assert.ok(
      data.every((n) => n.body.length === 99_999 && n.body.endsWith(`[[contact:${contact}]]`)),
      'each note whole',
    );
  });
});
