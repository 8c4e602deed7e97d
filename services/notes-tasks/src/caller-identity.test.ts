/**
 * Services trust only a signed caller identity (x-caller-token), never loose metadata: any pod in
 * the cluster can reach a service's port, so a call carrying just `x-tenant-id` must not act for it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Downstream } from '@workauto/grpc';
import { S, failure, startNotesTasks, tenant, type NotesTasks } from './test-support.js';

describe('notes-tasks refuses calls without a signed caller identity', () => {
  let nt: NotesTasks;
  let direct: Downstream;
  before(async () => {
    nt = await startNotesTasks();
    direct = new Downstream('notes_tasks', `127.0.0.1:${nt.port}`, { volumeThreshold: 100_000 });
  });
  after(async () => {
    direct.close();
    await nt.stop();
  });

  it('refuses a call with loose x-tenant-id / x-actor-* metadata only: UNAUTHENTICATED', async () => {
    const t = tenant();
    await nt.client.call(S.createNote, { title: 'secret', body: 'only for t' }, t.call);
    const loose = new grpc.Metadata();
    loose.set('x-tenant-id', t.id);
    loose.set('x-actor-type', 'api_key');
    loose.set('x-actor-id', 'forged');
    loose.set('x-member-id', t.memberId);
    const err = await failure(direct.call(S.listNotes, {}, { metadata: loose }));
    assert.equal(err.code, grpc.status.UNAUTHENTICATED, `got ${grpc.status[err.code]}: ${err.message}`);
    assert.equal(err.reason, 'CALLER_IDENTITY_INVALID');
  });

  it('refuses a call without any metadata: UNAUTHENTICATED', async () => {
    const err = await failure(direct.call(S.listNotes, {}));
    assert.equal(err.code, grpc.status.UNAUTHENTICATED);
    assert.equal(err.reason, 'CALLER_IDENTITY_INVALID');
  });
});
