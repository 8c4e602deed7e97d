import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as deals from '../../repo/deals.js';
import { SOURCE, dealData, type CrmDeps, type Handler } from '../common.js';

export function deleteDeal(deps: CrmDeps): Handler<'deleteDeal'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const current = await deals.findDeal(tx, tenantId, req.id, { forUpdate: true });
        if (!current) throw errors.notFound('deal', req.id);
        const deleted = await deals.updateDeal(tx, tenantId, current.id, { deleted_at: new Date() });
        await recordEvent(tx, SOURCE, ctx, {
          type: 'deal.deleted',
          resourceType: 'deal',
          resourceId: deleted.id,
          parent: { type: 'pipeline', id: deleted.pipeline_id },
          data: dealData(deleted),
          metadata: { deleted_at: deleted.deleted_at },
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
