import { newId, withTransaction } from '@workauto/db';
import { textOrNull, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { normalizeCurrency } from '../../domain/money.js';
import { orderOfInputs } from '../../domain/ordering.js';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import type { StageType } from '../../repo/stages.js';
import {
  checkConfidence,
  checkCurrency,
  SOURCE,
  pipelineData,
  stageTypes,
  toPipeline,
  type CrmDeps,
  type Handler,
} from '../common.js';
import { decimalOrNull, takeDefault } from './common.js';

export function createPipeline({ pool }: CrmDeps): Handler<'createPipeline'> {
  return async (req, ctx) => {
    const v = validate();
    checkCurrency(v, 'currency', req.currency);
    req.stages.forEach((s, i) => {
      checkConfidence(v, `stages[${i}].default_confidence`, s.default_confidence);
    });
    const ordering = orderOfInputs(req.stages.map((s) => s.display_order));
    if ('problem' in ordering) v.add('stages', ordering.problem);
    v.done();
    const order = 'order' in ordering ? ordering.order : [];
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        await pipelines.lockTenantPipelines(tx, tenantId);
        const existing = await pipelines.pipelineIdsInOrder(tx, tenantId);
        const isDefault = existing.length === 0 || req.is_default === true;
        if (isDefault) await takeDefault(tx, ctx, tenantId);
        const row = await pipelines.insertPipeline(tx, {
          id: newId(),
          tenant_id: tenantId,
          name: req.name.trim(),
          description: textOrNull(req.description) ?? null,
          currency: req.currency === undefined ? 'USD' : normalizeCurrency(req.currency)!,
          display_order: existing.length + 1,
          is_default: isDefault,
          metadata: req.metadata ?? {},
        });
        const inserted = await stages.insertStages(
          tx,
          order.map((i, position) => {
            const s = req.stages[i]!;
            return {
              id: newId(),
              tenant_id: tenantId,
              pipeline_id: row.id,
              name: s.name.trim(),
              stage_type: stageTypes.toDomain(s.stage_type) as StageType,
              default_confidence: decimalOrNull(s.default_confidence) ?? null,
              display_order: position + 1,
              metadata: s.metadata ?? {},
            };
          }),
        );
        await recordEvent(tx, SOURCE, ctx, {
          type: 'pipeline.created',
          resourceType: 'pipeline',
          resourceId: row.id,
          data: pipelineData(row, inserted),
        });
        return toPipeline(row, inserted);
      },
      { signal: ctx.signal },
    );
  };
}
