import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as deals from '../../repo/deals.js';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import { SOURCE, pipelineData, type CrmDeps, type Handler } from '../common.js';

export function deletePipeline({ pool }: CrmDeps): Handler<'deletePipeline'> {
  return async (req, ctx) => {
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        await pipelines.lockTenantPipelines(tx, tenantId);
        const current = await pipelines.findPipeline(tx, tenantId, req.id, 'update');
        if (!current) throw errors.notFound('pipeline', req.id);
        // Stage locks first: a deal being created in one of them commits before the check below.
        await stages.lockStagesOf(tx, tenantId, current.id);
        if (await deals.hasLiveDeals(tx, tenantId, current.id)) {
          throw errors.failedPrecondition(
            'PIPELINE_HAS_DEALS',
            'the pipeline still holds deals: move or delete them first',
          );
        }
        await stages.softDeleteStagesOf(tx, tenantId, current.id);
        const deleted = await pipelines.updatePipeline(tx, tenantId, current.id, {
          deleted_at: new Date(),
          is_default: false,
        });
        const rest = await pipelines.pipelineIdsInOrder(tx, tenantId);
        await pipelines.setPipelineOrder(tx, tenantId, rest);
        if (current.is_default && rest[0]) {
          // The tenant keeps a default: the first remaining pipeline in display order.
          const promoted = await pipelines.updatePipeline(tx, tenantId, rest[0], { is_default: true });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'pipeline.updated',
            resourceType: 'pipeline',
            resourceId: promoted.id,
            data: pipelineData(promoted, await stages.listStages(tx, tenantId, [promoted.id])),
            metadata: { is_default: true },
          });
        }
        await recordEvent(tx, SOURCE, ctx, {
          type: 'pipeline.deleted',
          resourceType: 'pipeline',
          resourceId: deleted.id,
          data: pipelineData(deleted, []),
          metadata: { deleted_at: deleted.deleted_at },
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
