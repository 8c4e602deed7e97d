import { withTransaction } from '@workauto/db';
import { errors, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as deals from '../../repo/deals.js';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import { SOURCE, dealData, stageData, type CrmDeps, type Handler } from '../common.js';

export function deletePipelineStage({ pool }: CrmDeps): Handler<'deletePipelineStage'> {
  return async (req, ctx) => {
    validate()
      .uuid('pipeline_id', req.pipeline_id, { required: true })
      .uuid('stage_id', req.stage_id, { required: true })
      .uuid('move_deals_to_stage_id', req.move_deals_to_stage_id)
      .check(
        !req.move_deals_to_stage_id || req.move_deals_to_stage_id !== req.stage_id,
        'move_deals_to_stage_id',
        'must be another stage than the one deleted',
      )
      .done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const pipeline = await pipelines.findPipeline(tx, tenantId, req.pipeline_id, 'update');
        if (!pipeline) throw errors.notFound('pipeline', req.pipeline_id);
        const stage = await stages.findStage(tx, tenantId, req.stage_id, { pipelineId: pipeline.id, lock: 'update' });
        if (!stage) throw errors.notFound('pipeline_stage', req.stage_id);
        let movedTo: string | undefined;
        let movedCount = 0;
        if (req.move_deals_to_stage_id) {
          const target = await stages.findStage(tx, tenantId, req.move_deals_to_stage_id, {
            pipelineId: pipeline.id,
            lock: 'share',
          });
          if (!target) throw errors.invalidField('move_deals_to_stage_id', 'must be a stage of the same pipeline');
          const moved = await deals.moveDealsBetweenStages(tx, tenantId, stage, target);
          for (const deal of moved) {
            await recordEvent(tx, SOURCE, ctx, {
              type: 'deal.stage_changed',
              resourceType: 'deal',
              resourceId: deal.id,
              parent: { type: 'pipeline', id: deal.pipeline_id },
              data: dealData(deal),
              metadata: {
                from_stage_id: stage.id,
                from_stage_name: stage.name,
                to_stage_id: target.id,
                to_stage_name: target.name,
              },
            });
          }
          movedTo = target.id;
          movedCount = moved.length;
        } else if (await deals.hasLiveDeals(tx, tenantId, pipeline.id, stage.id)) {
          throw errors.failedPrecondition(
            'STAGE_HAS_DEALS',
            'the stage holds deals: send {"move_deals_to_stage_id": "<another stage of the pipeline>"} as the request body to move them there',
          );
        }
        const deleted = await stages.softDeleteStage(tx, tenantId, stage.id);
        const rest = (await stages.listStages(tx, tenantId, [pipeline.id])).map((s) => s.id);
        await stages.setStageOrder(tx, tenantId, pipeline.id, rest);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'pipeline_stage.deleted',
          resourceType: 'pipeline_stage',
          resourceId: deleted.id,
          parent: { type: 'pipeline', id: deleted.pipeline_id },
          data: stageData(deleted),
          metadata: movedTo ? { moved_deals_to_stage_id: movedTo, moved_deals: movedCount } : {},
        });
        return {};
      },
      { signal: ctx.signal },
    );
  };
}
