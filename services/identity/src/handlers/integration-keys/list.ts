import { parsePage, toPage } from '@workauto/grpc';
import * as integrationKeys from '../../repo/integration-keys.js';
import { toIntegrationKey, type IdentityDeps, type Handler } from '../common.js';

export function listIntegrationKeys({ pool }: IdentityDeps): Handler<'listIntegrationKeys'> {
  return async (req, ctx) => {
    const page = parsePage(req);
    return toPage(await integrationKeys.listIntegrationKeys(pool, ctx.tenant, page), toIntegrationKey);
  };
}
