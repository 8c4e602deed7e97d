import pg from 'pg';
import { createLogger } from '@workauto/logger';
import { testDatabase, failure, testCallerKeys, TestClient } from '@workauto/testing';
import { NotesTasksServiceService as S } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { createNotesTasksService, type RunningService } from './app.js';

export { S };

/** notes-tasks on a fresh database, called over real gRPC, with a direct SQL client for checks. */
export async function startNotesTasks() {
  const databaseUrl = await testDatabase('notes');
  const service: RunningService = await createNotesTasksService(
    { databaseUrl, host: '127.0.0.1', port: 0, callerVerifyKeys: testCallerKeys.verifyKeys },
    createLogger('notes-tasks', 'silent'),
  );
  const client = new TestClient('notes_tasks', `127.0.0.1:${service.port}`, {
    volumeThreshold: 100_000,
    deadlineMs: 30_000,
  });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  return {
    databaseUrl,
    port: service.port,
    client,
    db,
    /** Event types of the tenant's outbox, in order. */
    async events(tenantId: string): Promise<string[]> {
      const { rows } = await db.query<{ event_type: string }>(
        'SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq',
        [tenantId],
      );
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

export { failure };

export { newTenant as tenant, badFields } from '@workauto/testing';
