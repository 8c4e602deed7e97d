// Scaffolding: the service is being built; its helper replaces this file.
import type { Logger } from '@workauto/logger';

export interface NotesTasksConfig {
  databaseUrl: string;
  host: string;
  port: number;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

export async function createNotesTasksService(_config: NotesTasksConfig, _logger?: Logger): Promise<RunningService> {
  throw new Error('notes-tasks is not built yet');
}
