import { fileURLToPath } from 'node:url';
import { createPool, runMigrations } from '@workauto/db';
import { LocalTransport, OUTBOX_MIGRATIONS, OutboxRelay, type EventTransport } from '@workauto/events';
import { GrpcServer, Resources } from '@workauto/grpc';
import { createLogger, type Logger } from '@workauto/logger';
import { CrmPipelinesServiceService } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { crmHandlers } from './handlers/index.js';

export interface CrmPipelinesConfig {
  databaseUrl: string;
  host: string;
  port: number;
  /** Event streams (Kafka, or in-process for one-process runs); a private in-process one by default. */
  transport?: EventTransport;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** Database → migrations → gRPC server → outbox relay, then SERVING. The same steps for main.ts, make dev and tests. */
export async function createCrmPipelinesService(config: CrmPipelinesConfig, logger: Logger = createLogger('crm-pipelines')): Promise<RunningService> {
  const resources = new Resources();
  return resources.start(async () => {
    const pool = resources.add(createPool(config.databaseUrl, { applicationName: 'crm-pipelines' }), (p) => p.end());
    const applied = await runMigrations(pool, [OUTBOX_MIGRATIONS, MIGRATIONS]);
    if (applied.length) logger.info({ applied }, 'migrations applied');
    const server = new GrpcServer({ name: 'crm-pipelines', errorDomain: 'crm.workauto', logger, protoFiles: ['workauto/crm_pipelines/v1/crm_pipelines.proto'] });
    server.add('workauto.crm_pipelines.v1.CrmPipelinesService', CrmPipelinesServiceService, crmHandlers({ pool }));
    resources.add(await OutboxRelay.start({ pool, transport: config.transport ?? new LocalTransport(), source: 'crm-pipelines', logger }), (r) => r.stop());
    // Closed first on stop: in-flight calls drain while the relay can still publish their events.
    resources.add(server, (s) => s.shutdown());
    const port = await server.listen(config.host, config.port);
    server.markServing();
    logger.info({ port }, 'crm-pipelines serving');
    return { port, stop: () => resources.close() };
  });
}
