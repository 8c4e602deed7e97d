import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { createLogger } from '@workauto/logger';
import { testDatabase, callAs, failure, testCallerKeys, TestClient } from '@workauto/testing';
import { NotesTasksServiceService as S } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { createNotesTasksService, type RunningService } from './app.js';

export { S };

/** notes-tasks on a fresh database, called over real gRPC, with a direct SQL client for checks. */
export async function startNotesTasks() {
  const databaseUrl = await testDatabase('notes');
  const service: RunningService = await createNotesTasksService({ databaseUrl, host: '127.0.0.1', port: 0, callerVerifyKeys: testCallerKeys.verifyKeys }, createLogger('notes-tasks', 'silent'));
  const client = new TestClient('notes_tasks', `127.0.0.1:${service.port}`, { volumeThreshold: 100_000, deadlineMs: 30_000 });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  return {
    databaseUrl,
    port: service.port,
    client,
    db,
    /** Event types of the tenant's outbox, in order. */
    async events(tenantId: string): Promise<string[]> {
      const { rows } = await db.query<{ event_type: string }>('SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq', [tenantId]);
      return rows.map((r) => r.event_type);
    },
    async stop() {
      client.close();
      await db.end();
      await service.stop();
    },
  };
}

export type NotesTasks = Awaited<ReturnType<typeof startNotesTasks>>;

/** A fresh tenant: call options acting for it, signed at each call as the gateway would. */
export function tenant(): { id: string; memberId: string; call: ReturnType<typeof callAs> } {
  const id = randomUUID();
  const memberId = randomUUID();
  return { id, memberId, call: callAs(id, memberId, randomUUID()) };
}

export { failure };

/** The fields of a 400's violations. */
export async function badFields(p: Promise<unknown>): Promise<string[]> {
  const err = await failure(p);
  assert.equal(err.code, grpc.status.INVALID_ARGUMENT, `expected INVALID_ARGUMENT, got ${grpc.status[err.code]}: ${err.message}`);
  return err.fieldViolations.map((v) => v.field);
}
