import { withTransaction } from '@workauto/db';
import { changedFields, errors, patchNulls, textOrNull, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { normalizeCurrency } from '../../domain/money.js';
import { moveTo } from '../../domain/ordering.js';
import * as deals from '../../repo/deals.js';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import { checkCurrency, SOURCE, pipelineData, toPipeline, type CrmDeps, type Handler } from '../common.js';
import { takeDefault } from './common.js';

export function updatePipeline({ pool }: CrmDeps): Handler<'updatePipeline'> {
  return async (patchRequest, ctx) => {
    const v = validate();
    const { req } = patchNulls(patchRequest, { text: ['description'] }, v);
    checkCurrency(v, 'currency', req.currency);
    v.done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        await pipelines.lockTenantPipelines(tx, tenantId);
        const current = await pipelines.findPipeline(tx, tenantId, req.id, 'update');
        if (!current) throw errors.notFound('pipeline', req.id);
        if (req.is_default === false && current.is_default) {
          throw errors.failedPrecondition(
            'DEFAULT_PIPELINE_REQUIRED',
            'a tenant always has one default pipeline: make another pipeline the default instead',
          );
        }
        const currency = req.currency === undefined ? undefined : normalizeCurrency(req.currency)!;
        if (currency !== undefined && currency !== current.currency) {
          // No deal may be put into the pipeline while its currency changes.
          await stages.lockStagesOf(tx, tenantId, current.id);
          if (await deals.hasLiveDeals(tx, tenantId, current.id)) {
            throw errors.failedPrecondition(
              'PIPELINE_HAS_DEALS',
              `the pipeline holds deals in ${current.currency}; its currency can change only while it has none`,
            );
          }
        }
        const becomesDefault = req.is_default === true && !current.is_default;
        if (becomesDefault) await takeDefault(tx, ctx, tenantId);
        if (req.display_order !== undefined) {
          const ids = await pipelines.pipelineIdsInOrder(tx, tenantId);
          await pipelines.setPipelineOrder(tx, tenantId, moveTo(ids, current.id, req.display_order));
        }
        const patch = {
          name: req.name?.trim(),
          description: textOrNull(req.description),
          currency,
          is_default: becomesDefault ? true : undefined,
          metadata: req.metadata,
        };
        const updated = await pipelines.updatePipeline(tx, tenantId, current.id, patch);
        const stageRows = await stages.listStages(tx, tenantId, [updated.id]);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'pipeline.updated',
          resourceType: 'pipeline',
          resourceId: updated.id,
          data: pipelineData(updated, stageRows),
          metadata: changedFields({ ...patch, display_order: req.display_order }),
        });
        return toPipeline(updated, stageRows);
      },
      { signal: ctx.signal },
    );
  };
}
