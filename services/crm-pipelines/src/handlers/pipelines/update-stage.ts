import { withTransaction } from '@workauto/db';
import { changedFields, errors, patchNulls, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { moveTo } from '../../domain/ordering.js';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import type { StageType } from '../../repo/stages.js';
import { checkConfidence, SOURCE, stageData, stageTypes, toStage, type CrmDeps, type Handler } from '../common.js';
import { decimalOrNull } from './common.js';

export function updatePipelineStage({ pool }: CrmDeps): Handler<'updatePipelineStage'> {
  return async (patchRequest, ctx) => {
    const v = validate();
    const { req, cleared } = patchNulls(patchRequest, { other: ['default_confidence'] }, v);
    checkConfidence(v, 'default_confidence', req.default_confidence);
    v.done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const pipeline = await pipelines.findPipeline(tx, tenantId, req.pipeline_id, 'update');
        if (!pipeline) throw errors.notFound('pipeline', req.pipeline_id);
        const current = await stages.findStage(tx, tenantId, req.stage_id, {
          pipelineId: pipeline.id,
          lock: 'update',
        });
        if (!current) throw errors.notFound('pipeline_stage', req.stage_id);
        if (req.display_order !== undefined) {
          const ids = (await stages.listStages(tx, tenantId, [pipeline.id])).map((s) => s.id);
          await stages.setStageOrder(tx, tenantId, pipeline.id, moveTo(ids, current.id, req.display_order));
        }
        const patch = {
          name: req.name?.trim(),
          stage_type: stageTypes.toDomain(req.stage_type) as StageType | undefined,
          default_confidence: cleared.has('default_confidence') ? null : decimalOrNull(req.default_confidence),
          metadata: req.metadata,
        };
        const updated = await stages.updateStage(tx, tenantId, current.id, patch);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'pipeline_stage.updated',
          resourceType: 'pipeline_stage',
          resourceId: updated.id,
          parent: { type: 'pipeline', id: updated.pipeline_id },
          data: stageData(updated),
          metadata: changedFields({
            ...patch,
            default_confidence: req.default_confidence,
            display_order: req.display_order,
          }),
        });
        return toStage(updated);
      },
      { signal: ctx.signal },
    );
  };
}
