import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { eventually } from '@workauto/testing';
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
    let handler: number | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM notes WHERE id = $1 FOR UPDATE', [note.id]);
      const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const err = await failure(
        nt.client.call(S.updateNote, { id: note.id, title: 'after' }, { ...t.call, deadlineMs: 300 }),
      );
      assert.equal(err.code, grpc.status.DEADLINE_EXCEEDED);
      // The handler's connection, still waiting for the row inside its transaction.
      await eventually('the update waits for the row', async () => {
        const { rows } = await nt.db.query<{ pid: number }>(
          'SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
          [blockerPid],
        );
        handler = rows[0]?.pid;
        return handler !== undefined;
      });
      await blocker.query('COMMIT');
    } finally {
      blocker.release();
    }
    // The handler now gets the lock and runs to its end; it must roll back instead of committing.
    await eventually('the update’s transaction ended', async () => {
      const { rows } = await nt.db.query<{ state: string; xid: string | null }>(
        'SELECT state, backend_xid AS xid FROM pg_stat_activity WHERE pid = $1',
        [handler],
      );
      return rows.length === 0 || (rows[0]!.state === 'idle' && rows[0]!.xid === null);
    });
    assert.equal((await nt.client.call(S.getNote, { id: note.id }, t.call)).title, 'before');
    assert.deepEqual(await nt.events(t.id), ['note.created'], 'no event either');
  });
});
