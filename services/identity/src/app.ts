import { fileURLToPath } from 'node:url';
import { createPool, runMigrations } from '@workauto/db';
import { OUTBOX_MIGRATIONS } from '@workauto/events';
import { GrpcServer } from '@workauto/grpc';
import { createLogger, type Logger } from '@workauto/logger';
import { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import { Keyring } from '@workauto/crypto';
import { identityHandlers } from './handlers/index.js';
import { OAuthProviders, type OAuthSettings } from './oauth.js';

export interface IdentityConfig {
  databaseUrl: string;
  host: string;
  port: number;
  platformAdminToken: string;
  /** Keyring spec for secrets at rest (`id:base64key,…`, first active); see @workauto/crypto. */
  encryptionKeys: string;
  /** Identity providers for OAuth consent; none configured means every idp is a 404. */
  oauth?: OAuthSettings;
}

export interface RunningService {
  port: number;
  stop(): Promise<void>;
}

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** Database → migrations → gRPC server, then SERVING. The same steps for main.ts, make dev and tests. */
export async function createIdentityService(config: IdentityConfig, logger: Logger = createLogger('identity')): Promise<RunningService> {
  const keyring = Keyring.fromEnv(config.encryptionKeys);
  const oauth = new OAuthProviders(config.oauth ?? { providers: {}, redirectBaseUrl: 'http://127.0.0.1:8080', allowedReturnOrigins: [] });
  const pool = createPool(config.databaseUrl, { applicationName: 'identity' });
  const applied = await runMigrations(pool, [OUTBOX_MIGRATIONS, MIGRATIONS]);
  if (applied.length) logger.info({ applied }, 'migrations applied');
  const server = new GrpcServer({ name: 'identity', errorDomain: 'identity.workauto', logger, protoFiles: ['workauto/identity/v1/identity.proto'] });
  server.add('workauto.identity.v1.IdentityService', IdentityServiceService, identityHandlers({ pool, platformAdminToken: config.platformAdminToken, keyring, oauth }));
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
