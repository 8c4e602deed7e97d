import { errors } from '@workauto/grpc';
import type { PipelineSummary } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { minorUnitDigits } from '../../domain/money.js';
import * as pipelines from '../../repo/pipelines.js';
import { pipelineSummary } from '../../repo/summary.js';
import { stageTypes, type CrmDeps, type Handler } from '../common.js';

export function getPipelineSummary({ pool }: CrmDeps): Handler<'getPipelineSummary'> {
  return async (req, ctx) => {
    const pipeline = await pipelines.findPipeline(pool, ctx.tenant, req.id);
    if (!pipeline) throw errors.notFound('pipeline', req.id);
    const rows = await pipelineSummary(pool, ctx.tenant, pipeline.id, minorUnitDigits(pipeline.currency));
    const first = rows[0];
    const summary: PipelineSummary = {
      pipeline_id: pipeline.id,
      pipeline_name: pipeline.name,
      currency: pipeline.currency,
      stages: rows.map((r) => ({
        stage_id: r.stage_id,
        stage_name: r.stage_name,
        stage_type: stageTypes.fromDomain(r.stage_type),
        deal_count: r.deal_count,
        total_value: Number(r.total_value),
        weighted_value: Number(r.weighted_value),
      })),
      total_deals: first?.total_deals ?? 0,
      total_value: first ? Number(first.pipeline_total_value) : 0,
      weighted_value: first ? Number(first.pipeline_weighted_value) : 0,
    };
    return summary;
  };
}
