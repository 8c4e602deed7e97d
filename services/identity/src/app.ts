import { fileURLToPath } from 'node:url';
import { TOPICS, startConsumer } from '@workauto/events';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { insertAuditEntries } from './repo/audit-log.js';
import { createLogger, type Logger } from '@workauto/logger';
import { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import { Keyring } from '@workauto/crypto';
import { identityHandlers } from './handlers/index.js';
import { OAuthProviders, type OAuthSettings } from './oauth.js';
import { WriteLease } from './write-lease.js';

export interface IdentityConfig extends ServiceConfig {
  platformAdminToken: string;
  /** Keyring spec for secrets at rest (`id:base64key,…`, first active); see @workauto/crypto. */
  encryptionKeys: string;
  /** Identity providers for OAuth consent; none configured means every idp is a 404. */
  oauth?: OAuthSettings;
  /**
   * AUTH_WRITE_LEASE_MS: how long after reading the revocation epoch a gateway may authenticate
   * writes from its cache, and so how long after committing identity answers a change that may
   * take a grant away (default 500; 0: gateways ask identity for every write).
   */
  authWriteLeaseMs?: number;
}

export type { RunningService };

/** Revocations answered half a second later; a gateway reads the epoch every ~125 ms while it serves writes. */
const DEFAULT_WRITE_LEASE_MS = 500;

/** identity with the shared start-up (@workauto/service), and the audit log's consumer of the audit stream. */
export function createIdentityService(
  config: IdentityConfig,
  logger: Logger = createLogger('identity'),
): Promise<RunningService> {
  const keyring = Keyring.fromEnv(config.encryptionKeys);
  const oauth = new OAuthProviders(
    config.oauth ?? { providers: {}, redirectBaseUrl: 'http://127.0.0.1:8080', allowedReturnOrigins: [] },
  );
  return startService(
    {
      name: 'identity',
      errorDomain: 'identity.workauto',
      protoFile: 'workauto/identity/v1/identity.proto',
      grpcService: 'workauto.identity.v1.IdentityService',
      definition: IdentityServiceService,
      migrations: fileURLToPath(new URL('../migrations', import.meta.url)),
      handlers: (pool) =>
        identityHandlers({
          pool,
          platformAdminToken: config.platformAdminToken,
          keyring,
          oauth,
          writeLease: new WriteLease(config.authWriteLeaseMs ?? DEFAULT_WRITE_LEASE_MS),
        }),
      // The audit log is the audit stream of every service, a batch in one statement, idempotent on
      // the event ids (the entry's id): a redelivered event is not recorded twice.
      consumers: async (pool, transport) => [
        await startConsumer({
          transport,
          pool,
          logger,
          groupId: 'identity.audit-log',
          topics: [TOPICS.audit],
          handleBatch: (db, events) =>
            insertAuditEntries(
              db,
              events.map((event) => ({
                id: event.id,
                tenant_id: event.tenant_id,
                action: event.type,
                actor_id: event.actor?.id || 'system',
                actor_type: event.actor?.type || 'system',
                // A member acting as itself is its own member (events recorded before member_id say only that).
                member_id: event.actor?.member_id || (event.actor?.type === 'member' ? event.actor.id : null),
                resource_type: event.resource?.type || null,
                resource_id: event.resource?.id || null,
                ip_address: event.request?.ip_address || null,
                user_agent: event.request?.user_agent || null,
                metadata: event.metadata,
                created_at: event.occurred_at ?? new Date(),
              })),
            ),
        }),
      ],
    },
    config,
    logger,
  );
}
