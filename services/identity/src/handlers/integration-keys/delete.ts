import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as integrationKeys from '../../repo/integration-keys.js';
import { SOURCE, caller, type IdentityDeps, type Handler } from '../common.js';

export function deleteIntegrationKey({ pool }: IdentityDeps): Handler<'deleteIntegrationKey'> {
  return async (req, ctx) => {
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
  };
}
