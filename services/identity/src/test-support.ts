import { Keyring } from '@workauto/crypto';
import { createLogger } from '@workauto/logger';
import { testDatabase, callAs, failure, testCallerKeys, TestClient } from '@workauto/testing';
import { IdentityServiceService as S } from '@workauto/protos/workauto/identity/v1/identity.js';
import { createIdentityService, type IdentityConfig, type RunningService } from './app.js';

export const ADMIN_TOKEN = 'platform-admin-token-for-identity-tests-0123456789';

/** Identity on a fresh database, called over real gRPC. */
export async function startIdentity(overrides: Partial<IdentityConfig> = {}) {
  const databaseUrl = await testDatabase('identity');
  const service: RunningService = await createIdentityService(
    {
      databaseUrl,
      host: '127.0.0.1',
      port: 0,
      callerVerifyKeys: testCallerKeys.verifyKeys,
      platformAdminToken: ADMIN_TOKEN,
      encryptionKeys: Keyring.generateSpec(),
      ...overrides,
    },
    createLogger('identity', 'silent'),
  );
  const client = new TestClient('identity', `127.0.0.1:${service.port}`, { volumeThreshold: 1_000 });
  return {
    databaseUrl,
    client,
    /** Call options acting with an API key, as the gateway signs them after AuthenticateToken. */
    async asKey(token: string): Promise<ReturnType<typeof callAs>> {
      const principal = await client.call(S.authenticateToken, { token });
      return callAs(principal.tenant_id, principal.member_id, principal.actor_id);
    },
    bootstrap: (name: string) =>
      client.call(S.createTenant, {
        name,
        owner: { name: `${name} owner`, email: `owner@${name.toLowerCase()}.test` },
      }),
    async stop() {
      client.close();
      await service.stop();
    },
  };
}

/** Call options acting as a member of a tenant with an unknown key (signed at each call as the gateway would): enough for reads, refused for mutations. */
export function as(tenantId: string, memberId: string): ReturnType<typeof callAs> {
  return callAs(tenantId, memberId, 'test');
}

export { failure };
