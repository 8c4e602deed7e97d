import { newId, type PoolClient } from '@workauto/db';
import { generateToken, hint, sha256Hex } from '@workauto/crypto';
import * as apiKeys from '../../repo/api-keys.js';

// API keys: every caller manages its own keys; another member's keys need admin on members (docs/api.md §3).

/** Issues a new API key for a member: returns the key (shown once) and stores only its hash. */
export async function issueApiKey(tx: PoolClient, tenantId: string, memberId: string, name: string) {
  const key = generateToken('wk_', 40);
  const row = await apiKeys.insertApiKey(tx, {
    id: newId(),
    tenant_id: tenantId,
    member_id: memberId,
    name,
    key_hash: sha256Hex(key),
    key_hint: hint(key),
  });
  return { key, row };
}
