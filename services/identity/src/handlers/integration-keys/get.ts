import { errors } from '@workauto/grpc';
import * as integrationKeys from '../../repo/integration-keys.js';
import { toIntegrationKey, type IdentityDeps, type Handler } from '../common.js';

export function getIntegrationKey({ pool }: IdentityDeps): Handler<'getIntegrationKey'> {
  return async (req, ctx) => {
    const row = await integrationKeys.findIntegrationKey(pool, ctx.tenant, req.provider);
    if (!row) throw errors.notFound('integration_key', req.provider);
    return toIntegrationKey(row);
  };
}
