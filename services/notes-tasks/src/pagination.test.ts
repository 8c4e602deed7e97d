import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { S, badFields, startNotesTasks, tenant, type NotesTasks } from './test-support.js';

describe('list pagination over gRPC', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  it('returns each of 400 notes created 16 at a time exactly once, in order, 7 per page', async () => {
    const t = tenant();
    for (let batch = 0; batch < 25; batch++) {
      await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          nt.client.call(S.createNote, { title: `n${batch * 16 + i}`, body: '' }, t.call),
        ),
      );
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await nt.client.call(S.listNotes, { limit: 7, ...(cursor ? { cursor } : {}) }, t.call);
      assert.ok(page.data.length <= 7);
      seen.push(...page.data.map((n) => n.id));
      if (!page.has_more) break;
      cursor = page.next_cursor;
      assert.ok(cursor, 'has_more comes with a next_cursor');
    }
    // The order of docs/api.md §6: newest first by the full-precision created_at, ties by id.
    const { rows } = await nt.db.query<{ id: string }>(
      'SELECT id FROM notes WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC',
      [t.id],
    );
    assert.equal(new Set(seen).size, seen.length, 'no note appears twice');
    assert.equal(seen.length, 400);
    assert.deepEqual(
      seen,
      rows.map((r) => r.id),
    );
  });

  it('refuses a cursor it did not issue with a 400 on the cursor field', async () => {
    const t = tenant();
    for (const cursor of [
      'nope',
      Buffer.from('["yesterday","x"]').toString('base64url'),
      Buffer.from('{}').toString('base64url'),
    ]) {
      assert.deepEqual(await badFields(nt.client.call(S.listNotes, { cursor }, t.call)), ['cursor']);
      assert.deepEqual(await badFields(nt.client.call(S.listTasks, { cursor }, t.call)), ['cursor']);
    }
  });
});
