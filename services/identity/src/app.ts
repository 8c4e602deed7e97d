import { fileURLToPath } from 'node:url';
import { createPool, runMigrations } from '@workauto/db';
import { OUTBOX_MIGRATIONS } from '@workauto/events';
import { GrpcServer } from '@workauto/grpc';
import { createLogger, type Logger } from '@workauto/logger';
import { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import { identityHandlers } from './handlers.js';

export interface IdentityConfig {
  databaseUrl: string;
  host: string;
  port: number;
  platformAdminToken: string;
  /** Keyring spec for secrets at rest (`id:base64key,…`, first active); see @workauto/crypto. */
  encryptionKeys: string;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** Database → migrations → gRPC server, then SERVING. The same steps for main.ts, make dev and tests. */
export async function createIdentityService(config: IdentityConfig, logger: Logger = createLogger('identity')): Promise<RunningService> {
  const pool = createPool(config.databaseUrl, { applicationName: 'identity' });
  const applied = await runMigrations(pool, [OUTBOX_MIGRATIONS, MIGRATIONS]);
  if (applied.length) logger.info({ applied }, 'migrations applied');
  const server = new GrpcServer({ name: 'identity', errorDomain: 'identity.workauto', logger, protoFiles: ['workauto/identity/v1/identity.proto'] });
  server.add('workauto.identity.v1.IdentityService', IdentityServiceService, identityHandlers({ pool, platformAdminToken: config.platformAdminToken }));
  const port = await server.listen(config.host, config.port);
  server.markServing();
  logger.info({ port }, 'identity serving');
  return {
    port,
    async stop() {
      await server.shutdown();
      await pool.end();
    },
  };
}
