import { fileURLToPath } from 'node:url';
import { createLogger, type Logger } from '@workauto/logger';
import { CrmPipelinesServiceService } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { crmHandlers } from './handlers/index.js';

export type CrmPipelinesConfig = ServiceConfig;
export type { RunningService };

/** crm-pipelines with the shared start-up (@workauto/service): the same steps for main.ts, make dev and tests. */
export function createCrmPipelinesService(
  config: CrmPipelinesConfig,
  logger: Logger = createLogger('crm-pipelines'),
): Promise<RunningService> {
  return startService(
    {
      name: 'crm-pipelines',
      errorDomain: 'crm.workauto',
      protoFile: 'workauto/crm_pipelines/v1/crm_pipelines.proto',
      grpcService: 'workauto.crm_pipelines.v1.CrmPipelinesService',
      definition: CrmPipelinesServiceService,
      migrations: fileURLToPath(new URL('../migrations', import.meta.url)),
      handlers: (pool) => crmHandlers({ pool }),
    },
    config,
    logger,
  );
}
