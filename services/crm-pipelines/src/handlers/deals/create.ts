import { newId, withTransaction } from '@workauto/db';
import { validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { amountDecimal, amountRangeProblem, normalizeCurrency } from '../../domain/money.js';
import * as deals from '../../repo/deals.js';
import { checkConfidence, checkCurrency, SOURCE, dealData, toDeal, type CrmDeps, type Handler } from '../common.js';
import { checkMoney, checkContact, lockPlacement, writeMove } from './common.js';

export function createDeal(deps: CrmDeps): Handler<'createDeal'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const v = validate();
    if (req.amount !== undefined && amountRangeProblem(req.amount)) v.add('amount', amountRangeProblem(req.amount)!);
    checkCurrency(v, 'currency', req.currency);
    checkConfidence(v, 'confidence', req.confidence);
    v.done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        const { pipeline, stage } = await lockPlacement(tx, tenantId, {
          stageId: req.stage_id,
          pipelineId: req.pipeline_id,
        });
        checkMoney(
          pipeline,
          req.currency === undefined ? pipeline.currency : normalizeCurrency(req.currency)!,
          req.amount,
        );
        await checkContact(tx, tenantId, req.contact_id);
        const deal = await deals.insertDeal(tx, {
          id: newId(),
          tenant_id: tenantId,
          pipeline_id: pipeline.id,
          stage_id: stage.id,
          title: req.title.trim(),
          amount: req.amount === undefined ? '0' : amountDecimal(req.amount),
          currency: pipeline.currency,
          confidence: req.confidence === undefined ? null : String(req.confidence),
          contact_id: req.contact_id ?? null,
          owner_id: req.owner_id ?? null,
          expected_close_date: req.expected_close_date ?? null,
          metadata: req.metadata ?? {},
        });
        await writeMove(tx, ctx, deal, null);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'deal.created',
          resourceType: 'deal',
          resourceId: deal.id,
          parent: { type: 'pipeline', id: deal.pipeline_id },
          data: dealData(deal),
        });
        return toDeal(deal);
      },
      { signal: ctx.signal },
    );
  };
}
