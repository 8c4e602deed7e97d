import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { Keyring } from '@workauto/crypto';
import { Downstream, MetadataKeys, decodeStatusDetails, type ErrorDetails } from '@workauto/grpc';
import { createLogger } from '@workauto/logger';
import { testDatabase } from '@workauto/testing';
import { IdentityServiceService as S } from '@workauto/protos/workauto/identity/v1/identity.js';
import { createIdentityService, type IdentityConfig, type RunningService } from './app.js';

export const ADMIN_TOKEN = 'platform-admin-token-for-identity-tests-0123456789';

/** Identity on a fresh database, called over real gRPC. */
export async function startIdentity(overrides: Partial<IdentityConfig> = {}) {
  const databaseUrl = await testDatabase('identity');
  const service: RunningService = await createIdentityService(
    { databaseUrl, host: '127.0.0.1', port: 0, platformAdminToken: ADMIN_TOKEN, encryptionKeys: Keyring.generateSpec(), ...overrides },
    createLogger('identity', 'silent'),
  );
  const client = new Downstream('identity', `127.0.0.1:${service.port}`, { volumeThreshold: 1_000 });
  return {
    databaseUrl,
    client,
    bootstrap: (name: string) => client.call(S.createTenant, { name, owner: { name: `${name} owner`, email: `owner@${name.toLowerCase()}.test` } }),
    async stop() {
      client.close();
      await service.stop();
    },
  };
}

/** Call options acting as a member of a tenant, as the gateway would set them. */
export function as(tenantId: string, memberId: string): { metadata: grpc.Metadata } {
  const md = new grpc.Metadata();
  md.set(MetadataKeys.tenantId, tenantId);
  md.set(MetadataKeys.actorType, 'api_key');
  md.set(MetadataKeys.actorId, 'test');
  md.set(MetadataKeys.memberId, memberId);
  return { metadata: md };
}

/** The error details of a call that must fail. */
export async function failure(p: Promise<unknown>): Promise<ErrorDetails> {
  try {
    await p;
  } catch (err) {
    return decodeStatusDetails(err as grpc.ServiceError);
  }
  assert.fail('expected the call to fail');
}
