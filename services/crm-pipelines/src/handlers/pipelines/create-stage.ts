import { newId, withTransaction } from '@workauto/db';
import { errors, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { moveTo } from '../../domain/ordering.js';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import type { StageType } from '../../repo/stages.js';
import {
  checkConfidence,
  LIMITS,
  SOURCE,
  stageData,
  stageTypes,
  toStage,
  type CrmDeps,
  type Handler,
} from '../common.js';
import { decimalOrNull } from './common.js';

export function createPipelineStage({ pool }: CrmDeps): Handler<'createPipelineStage'> {
  return async (req, ctx) => {
    checkConfidence(validate(), 'default_confidence', req.default_confidence).done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        // The pipeline's row lock serialises changes to its set of stages.
        const pipeline = await pipelines.findPipeline(tx, tenantId, req.pipeline_id, 'update');
        if (!pipeline) throw errors.notFound('pipeline', req.pipeline_id);
        const siblings = await stages.listStages(tx, tenantId, [pipeline.id]);
        if (siblings.length >= LIMITS.stagesPerPipeline) {
          throw errors.failedPrecondition(
            'TOO_MANY_STAGES',
            `a pipeline has at most ${LIMITS.stagesPerPipeline} stages`,
          );
        }
        const [inserted] = await stages.insertStages(tx, [
          {
            id: newId(),
            tenant_id: tenantId,
            pipeline_id: pipeline.id,
            name: req.name.trim(),
            stage_type: stageTypes.toDomain(req.stage_type) as StageType,
            default_confidence: decimalOrNull(req.default_confidence) ?? null,
            display_order: siblings.length + 1,
            metadata: req.metadata ?? {},
          },
        ]);
        let row = inserted!;
        if (req.display_order !== undefined && req.display_order <= siblings.length) {
          await stages.setStageOrder(
            tx,
            tenantId,
            pipeline.id,
            moveTo([...siblings.map((s) => s.id), row.id], row.id, req.display_order),
          );
          row = (await stages.findStage(tx, tenantId, row.id))!;
        }
        await recordEvent(tx, SOURCE, ctx, {
          type: 'pipeline_stage.created',
          resourceType: 'pipeline_stage',
          resourceId: row.id,
          parent: { type: 'pipeline', id: row.pipeline_id },
          data: stageData(row),
        });
        return toStage(row);
      },
      { signal: ctx.signal },
    );
  };
}
