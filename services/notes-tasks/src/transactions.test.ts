import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { S, failure, startNotesTasks, tenant, type NotesTasks } from './test-support.js';

describe('transactions and the call deadline', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  it('commits nothing when the deadline passes mid-transaction (the client saw it fail)', async () => {
    const t = tenant();
    const note = await nt.client.call(S.createNote, { title: 'before', body: '' }, t.call);
    // Another writer holds the note's row: the update waits inside its transaction past the deadline.
    const blocker = await nt.db.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM notes WHERE id = $1 FOR UPDATE', [note.id]);
      const err = await failure(
        nt.client.call(S.updateNote, { id: note.id, title: 'after' }, { ...t.call, deadlineMs: 300 }),
      );
      assert.equal(err.code, grpc.status.DEADLINE_EXCEEDED);
      await blocker.query('COMMIT');
    } finally {
      blocker.release();
    }
    // The handler now gets the lock and runs to its end; it must roll back instead of committing.
    await sleep(500);
    assert.equal((await nt.client.call(S.getNote, { id: note.id }, t.call)).title, 'before');
    assert.deepEqual(await nt.events(t.id), ['note.created'], 'no event either');
  });
});
