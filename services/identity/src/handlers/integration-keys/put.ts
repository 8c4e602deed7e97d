import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { SOURCE, caller, integrationKeyData, toIntegrationKey, type IdentityDeps, type Handler } from '../common.js';
import { storeCredential } from './common.js';

export function putIntegrationKey(deps: IdentityDeps): Handler<'putIntegrationKey'> {
  const { pool } = deps;
  return async (req, ctx) => {
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
  };
}
