/**
 * Idempotency-Key in every service, from the kit: a keyed call's handler runs once, a repeat gets the
 * first response over real gRPC marked replayed in the response metadata, and what is stored is
 * sealed with keys only the gateway derives (docs/api.md, Idempotency).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { withTransaction } from '@workauto/db';
import {
  IDEMPOTENT_REPLAYED_KEY,
  idempotencyScope,
  idempotencySealInfo,
  type Caller,
  type Handlers,
} from '@workauto/grpc';
import { createLogger, setLogTarget } from '@workauto/logger';
import { Note, NotesTasksServiceService as S } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { TestClient, failure, newTenant, testCallerKeys, testDatabase } from '@workauto/testing';
import { startService, type RunningService } from './index.js';

if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_c, _e, done) => done() }));

const migrations = mkdtempSync(join(tmpdir(), 'keyed-test-migrations-'));
writeFileSync(join(migrations, '0001_notes.sql'), 'CREATE TABLE notes (id uuid PRIMARY KEY, title text NOT NULL);');

describe('keyed calls in the service kit', () => {
  const gatewayKeyring = Keyring.fromEnv(Keyring.generateSpec());
  let svc: RunningService;
  let client: TestClient;
  let db: pg.Client;
  let runs = 0;
  const tenant = newTenant();

  before(async () => {
    const databaseUrl = await testDatabase('keyed');
    svc = await startService(
      {
        name: 'keyed-test',
        errorDomain: 'test.workauto',
        protoFile: 'workauto/notes_tasks/v1/notes_tasks.proto',
        grpcService: 'workauto.notes_tasks.v1.NotesTasksService',
        definition: S,
        migrations,
        handlers: (pool) =>
          ({
            createNote: (req: { title: string }) => {
              runs++;
              return withTransaction(pool, async (tx) => {
                const id = randomUUID();
                await tx.query('INSERT INTO notes (id, title) VALUES ($1, $2)', [id, req.title]);
                return Note.fromPartial({ id, title: req.title });
              });
            },
            deleteNote: async (req: { id: string }) => {
              runs++;
              await withTransaction(pool, (tx) => tx.query('DELETE FROM notes WHERE id = $1', [req.id]));
              return {};
            },
          }) as unknown as Handlers<typeof S>,
      },
      { databaseUrl, host: '127.0.0.1', port: 0, callerVerifyKeys: testCallerKeys.verifyKeys },
      createLogger('keyed-test', 'info'),
    );
    client = new TestClient('notes_tasks', `127.0.0.1:${svc.port}`);
    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
  });
  after(async () => {
    client?.close();
    await db?.end();
    await svc?.stop();
  });

  /** A call as the gateway makes a keyed one: the key and the sealing keys it derives beside the caller. */
  const keyed = async <Req, Res>(
    method: typeof S.createNote | typeof S.deleteNote,
    request: Req,
    key: string,
    keyring = gatewayKeyring,
  ) => {
    const caller: Caller = {
      ...tenant.call.caller,
      requestId: randomUUID(),
      idempotencyKey: key,
      idempotencySeal: keyring.derive(idempotencySealInfo(idempotencyScope(tenant.call.caller), key)),
    };
    let replayed = false;
    const response = (await client.call(method as never, request as never, {
      caller,
      onMetadata: (md) => (replayed = md.get(IDEMPOTENT_REPLAYED_KEY)[0] === 'true'),
    })) as Res;
    return { response, replayed };
  };
  const notesTitled = async (title: string) =>
    (await db.query('SELECT 1 FROM notes WHERE title = $1', [title])).rowCount;

  it('runs the handler once: a repeat gets the first response, marked replayed', async () => {
    const key = randomUUID();
    runs = 0;
    const first = await keyed(S.createNote, { title: 'once' }, key);
    const again = await keyed(S.createNote, { title: 'once' }, key);
    assert.equal(first.replayed, false);
    assert.equal(again.replayed, true);
    assert.deepEqual(again.response, first.response);
    assert.equal(runs, 2, 'the repeat reached the handler');
    assert.equal(await notesTitled('once'), 1, 'and wrote nothing');
  });

  it('stores the response sealed: the database alone does not show it', async () => {
    const key = randomUUID();
    await keyed(S.createNote, { title: 'a secret-looking title' }, key);
    const { rows } = await db.query<{ response: string }>('SELECT response FROM idempotency_records WHERE key = $1', [
      key,
    ]);
    assert.match(rows[0]!.response, /^wk1\./);
    assert.ok(!Buffer.from(rows[0]!.response).toString().includes('secret-looking'));
  });

  it("a repeat whose sealing keys cannot open the stored response (not the gateway's) learns it was applied, and gets nothing", async () => {
    const key = randomUUID();
    await keyed(S.createNote, { title: 'sealed for the gateway' }, key);
    const forged = Keyring.fromEnv(Keyring.generateSpec());
    const err = await failure(keyed(S.createNote, { title: 'sealed for the gateway' }, key, forged));
    assert.equal(err.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(err.reason, 'IDEMPOTENT_RESPONSE_LOST');
    assert.equal(await notesTitled('sealed for the gateway'), 1);
  });

  it('refuses the key with another request: 409 IDEMPOTENCY_KEY_REUSED', async () => {
    const key = randomUUID();
    await keyed(S.createNote, { title: 'first body' }, key);
    const err = await failure(keyed(S.createNote, { title: 'second body' }, key));
    assert.equal(err.code, grpc.status.ABORTED);
    assert.equal(err.reason, 'IDEMPOTENCY_KEY_REUSED');
    assert.equal(await notesTitled('second body'), 0);
  });

  it('replays a call whose response has no fields (a delete)', async () => {
    const created = await keyed(S.createNote, { title: 'to delete' }, randomUUID());
    const key = randomUUID();
    const id = (created.response as { id: string }).id;
    assert.equal((await keyed(S.deleteNote, { id }, key)).replayed, false);
    assert.equal((await keyed(S.deleteNote, { id }, key)).replayed, true);
  });

  it('records nothing for a call without a key', async () => {
    const before = (await db.query('SELECT 1 FROM idempotency_records')).rowCount;
    await client.call(S.createNote, { title: 'no key' } as never, tenant.call);
    await client.call(S.createNote, { title: 'no key' } as never, tenant.call);
    assert.equal(await notesTitled('no key'), 2);
    assert.equal((await db.query('SELECT 1 FROM idempotency_records')).rowCount, before);
  });
});
