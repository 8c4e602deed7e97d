import { errors } from '@workauto/grpc';
import * as deals from '../../repo/deals.js';
import * as history from '../../repo/history.js';
import { LIMITS, toHistory, type CrmDeps, type Handler } from '../common.js';

export function listDealHistory(deps: CrmDeps): Handler<'listDealHistory'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const deal = await deals.findDeal(pool, ctx.tenant, req.id);
    if (!deal) throw errors.notFound('deal', req.id);
    return { data: (await history.listHistory(pool, ctx.tenant, deal.id, LIMITS.historyEntries)).map(toHistory) };
  };
}
