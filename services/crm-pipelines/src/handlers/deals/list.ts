import { parsePage, toPage } from '@workauto/grpc';
import type { StageType } from '../../repo/stages.js';
import * as deals from '../../repo/deals.js';
import { dealStatuses, toDeal, type CrmDeps, type Handler } from '../common.js';

export function listDeals(deps: CrmDeps): Handler<'listDeals'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const page = parsePage(req);
    const listed = await deals.listDeals(
      pool,
      ctx.tenant,
      {
        pipeline_id: req.pipeline_id || undefined,
        stage_id: req.stage_id || undefined,
        status: dealStatuses.toDomain(req.status) as StageType | undefined,
        owner_id: req.owner_id || undefined,
        contact_id: req.contact_id || undefined,
      },
      page,
    );
    return toPage(listed, toDeal);
  };
}
