import { newId } from '@workauto/db';
import { hint, Keyring } from '@workauto/crypto';
import * as integrationKeys from '../../repo/integration-keys.js';
import type { IdentityDeps } from '../common.js';

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
