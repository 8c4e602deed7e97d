import { fileURLToPath } from 'node:url';
import { createPool, runMigrations } from '@workauto/db';
import { LocalTransport, OUTBOX_MIGRATIONS, OutboxRelay, TOPICS, startConsumer, type EventTransport } from '@workauto/events';
import { insertAuditEntry } from './repo/audit-log.js';
import { GrpcServer, Resources } from '@workauto/grpc';
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
  /** Event streams (Kafka, or in-process for one-process runs); a private in-process one by default. */
  transport?: EventTransport;
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
  const resources = new Resources();
  return resources.start(async () => {
    const pool = resources.add(createPool(config.databaseUrl, { applicationName: 'identity' }), (p) => p.end());
    const applied = await runMigrations(pool, [OUTBOX_MIGRATIONS, MIGRATIONS]);
    if (applied.length) logger.info({ applied }, 'migrations applied');
    const server = new GrpcServer({ name: 'identity', errorDomain: 'identity.workauto', logger, protoFiles: ['workauto/identity/v1/identity.proto'] });
    server.add('workauto.identity.v1.IdentityService', IdentityServiceService, identityHandlers({ pool, platformAdminToken: config.platformAdminToken, keyring, oauth }));
    const transport = config.transport ?? new LocalTransport();
    // The audit log is the audit stream of every service, applied once per event.
    resources.add(
      await startConsumer({
        transport, pool, logger, groupId: 'identity.audit-log', topics: [TOPICS.audit],
        handle: (tx, event) =>
          insertAuditEntry(tx, {
            id: event.id, tenant_id: event.tenant_id, action: event.type,
            actor_id: event.actor?.id || 'system', actor_type: event.actor?.type || 'system',
            resource_type: event.resource?.type || null, resource_id: event.resource?.id || null,
            ip_address: event.request?.ip_address || null, user_agent: event.request?.user_agent || null,
            metadata: event.metadata ?? {}, created_at: event.occurred_at ?? new Date(),
          }),
      }),
      (c) => c.stop(),
    );
    resources.add(await OutboxRelay.start({ pool, transport, source: 'identity', logger }), (r) => r.stop());
    // Closed first on stop: in-flight calls drain while the relay can still publish their events.
    resources.add(server, (s) => s.shutdown());
    const port = await server.listen(config.host, config.port);
    server.markServing();
    logger.info({ port }, 'identity serving');
    return { port, stop: () => resources.close() };
  });
}
