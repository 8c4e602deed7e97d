import { errors } from '@workauto/grpc';
import * as deals from '../../repo/deals.js';
import { toDeal, type CrmDeps, type Handler } from '../common.js';

export function getDeal(deps: CrmDeps): Handler<'getDeal'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const row = await deals.findDeal(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('deal', req.id);
    return toDeal(row);
  };
}
