// Scaffolding: the service is being built; its helper replaces this file.
import type { Logger } from '@workauto/logger';

export interface CrmPipelinesConfig {
  databaseUrl: string;
  host: string;
  port: number;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

export async function createCrmPipelinesService(_config: CrmPipelinesConfig, _logger?: Logger): Promise<RunningService> {
  throw new Error('crm-pipelines is not built yet');
}
