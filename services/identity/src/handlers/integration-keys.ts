import { withTransaction, newId } from '@workauto/db';
import { errors, parsePage, toPage, type Handlers } from '@workauto/grpc';
import { hint, Keyring } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import type { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import * as integrationKeys from '../repo/integration-keys.js';
import { SOURCE, caller, integrationKeyData, toIntegrationKey, type IdentityDeps } from './common.js';

type H = Handlers<typeof IdentityServiceService>;

/** AAD of a stored credential: a ciphertext copied to another tenant or provider does not decrypt. */
const credentialContext = (tenantId: string, provider: string) => `integration_key:${tenantId}:${provider}`;

/** Encrypts and stores a tenant's credential for a provider (also used by the OAuth callback). */
export async function storeCredential(
  deps: IdentityDeps,
  tx: Parameters<typeof integrationKeys.upsertIntegrationKey>[0],
  tenantId: string,
  provider: string,
  credential: string,
  opts: { label: string | null; metadata: Record<string, unknown>; verified: boolean },
) {
  const ciphertext = deps.keyring.encrypt(credential, credentialContext(tenantId, provider));
  return integrationKeys.upsertIntegrationKey(tx, {
    id: newId(),
    tenant_id: tenantId,
    provider,
    ciphertext,
    key_id: Keyring.keyIdOf(ciphertext),
    key_hint: hint(credential),
    ...opts,
  });
}

export function integrationKeyHandlers(
  deps: IdentityDeps,
): Pick<H, 'listIntegrationKeys' | 'getIntegrationKey' | 'putIntegrationKey' | 'deleteIntegrationKey'> {
  const { pool } = deps;
  return {
    async listIntegrationKeys(req, ctx) {
      const page = parsePage(req);
      return toPage(await integrationKeys.listIntegrationKeys(pool, ctx.tenant, page), toIntegrationKey);
    },

    async getIntegrationKey(req, ctx) {
      const row = await integrationKeys.findIntegrationKey(pool, ctx.tenant, req.provider);
      if (!row) throw errors.notFound('integration_key', req.provider);
      return toIntegrationKey(row);
    },

    async putIntegrationKey(req, ctx) {
      return withTransaction(
        pool,
        async (tx) => {
          await caller(tx, ctx);
          const row = await storeCredential(deps, tx, ctx.tenant, req.provider, req.credential.trim(), {
            label: req.label?.trim() ?? null,
            metadata: {},
            verified: false,
          });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'integration_key.updated',
            resourceType: 'integration_key',
            resourceId: row.id,
            data: integrationKeyData(row),
            metadata: { provider: row.provider, key_version: row.key_version, label: row.label },
          });
          return toIntegrationKey(row);
        },
        { signal: ctx.signal },
      );
    },

    async deleteIntegrationKey(req, ctx) {
      return withTransaction(
        pool,
        async (tx) => {
          await caller(tx, ctx);
          const row = await integrationKeys.deleteIntegrationKey(tx, ctx.tenant, req.provider);
          if (!row) throw errors.notFound('integration_key', req.provider);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'integration_key.deleted',
            resourceType: 'integration_key',
            resourceId: row.id,
            metadata: { provider: row.provider },
          });
          return {};
        },
        { signal: ctx.signal },
      );
    },
  };
}
