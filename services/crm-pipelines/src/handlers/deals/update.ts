import { withTransaction } from '@workauto/db';
import { errors, validate, patchNulls, changedFields, textOrNull } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { amountDecimal, amountRangeProblem, normalizeCurrency, storedAmountProblem } from '../../domain/money.js';
import * as deals from '../../repo/deals.js';
import * as pipelines from '../../repo/pipelines.js';
import { checkConfidence, checkCurrency, SOURCE, dealData, toDeal, type CrmDeps, type Handler } from '../common.js';
import { checkMoney, checkContact, lockPlacement, writeMove } from './common.js';

export function updateDeal(deps: CrmDeps): Handler<'updateDeal'> {
  const { pool } = deps;
  return async (patchRequest, ctx) => {
    const v = validate();
    // null clears: text and ids as '' does; confidence goes back to unset (the stage's default applies).
    const { req, cleared } = patchNulls(
      patchRequest,
      { text: ['contact_id', 'owner_id', 'expected_close_date'], other: ['confidence'] },
      v,
    );
    // Ids, the title, the date and the ranges are the proto's rules (docs/api.md §16).
    if (req.amount !== undefined && amountRangeProblem(req.amount)) v.add('amount', amountRangeProblem(req.amount)!);
    checkCurrency(v, 'currency', req.currency);
    checkConfidence(v, 'confidence', req.confidence);
    v.done();
    const tenantId = ctx.tenant;
    return withTransaction(
      pool,
      async (tx) => {
        // Target first (pipeline, stage), then the deal, in the order of stage and pipeline changes.
        const movesTo = (deal: deals.DealRow) =>
          Boolean(req.stage_id || (req.pipeline_id && req.pipeline_id !== deal.pipeline_id));
        const place = () => lockPlacement(tx, tenantId, { stageId: req.stage_id, pipelineId: req.pipeline_id });
        let placement: Awaited<ReturnType<typeof place>> | undefined;
        if (req.stage_id) {
          // A named stage moves the deal whatever stage it is in: the placement is locked without
          // reading the deal first. A missing deal still answers before a bad stage.
          placement = await place().catch(async (err: unknown) => {
            const exists = await deals.findDeal(tx, tenantId, req.id).then(Boolean, () => true);
            throw exists ? err : errors.notFound('deal', req.id);
          });
        } else {
          const before = await deals.findDeal(tx, tenantId, req.id);
          if (!before) throw errors.notFound('deal', req.id);
          if (movesTo(before)) placement = await place();
        }
        // The deal's row lock orders concurrent changes: each move reads the stage the previous one left.
        const current = await deals.findDeal(tx, tenantId, req.id, { forUpdate: true });
        if (!current) throw errors.notFound('deal', req.id);
        if (!placement && movesTo(current)) placement = await place(); // it changed pipeline meanwhile (rare)
        const target = placement?.stage;
        const moves = target !== undefined && target.id !== current.stage_id;
        const pipeline = placement?.pipeline ?? (await pipelines.findPipeline(tx, tenantId, current.pipeline_id))!;
        // The deal's currency is its pipeline's (docs/crm-pipelines.md "Money and numbers"): a move changes it, and the amount kept
        // must fit the new currency's minor unit.
        const currency = req.currency === undefined ? pipeline.currency : normalizeCurrency(req.currency)!;
        checkMoney(pipeline, currency, req.amount);
        const kept =
          req.amount === undefined && pipeline.currency !== current.currency
            ? storedAmountProblem(current.amount, pipeline.currency)
            : undefined;
        if (kept)
          throw errors.invalidField(
            'amount',
            `the deal's amount ${kept}: send an amount valid in ${pipeline.currency} with the move`,
          );
        const contactId = req.contact_id === undefined ? undefined : req.contact_id || null;
        await checkContact(tx, tenantId, contactId);
        const fields = {
          title: req.title?.trim(),
          amount: req.amount === undefined ? undefined : amountDecimal(req.amount),
          currency: currency === current.currency ? undefined : currency,
          confidence: cleared.has('confidence')
            ? null
            : req.confidence === undefined
              ? undefined
              : String(req.confidence),
          contact_id: contactId,
          owner_id: req.owner_id === undefined ? undefined : req.owner_id || null,
          expected_close_date: textOrNull(req.expected_close_date),
          metadata: req.metadata,
        };
        const updated = await deals.updateDeal(tx, tenantId, current.id, {
          ...fields,
          ...(moves ? { pipeline_id: target.pipeline_id, stage_id: target.id } : {}),
        });
        const changed = changedFields(fields);
        if (moves) await writeMove(tx, ctx, updated, { id: current.stage_id, name: current.stage_name });
        if (!moves || Object.keys(changed).length > 0) {
          await recordEvent(tx, SOURCE, ctx, {
            type: 'deal.updated',
            resourceType: 'deal',
            resourceId: updated.id,
            parent: { type: 'pipeline', id: updated.pipeline_id },
            data: dealData(updated),
            metadata: {
              ...changed,
              ...(req.amount !== undefined ? { amount: req.amount } : {}),
              ...(req.confidence !== undefined ? { confidence: req.confidence } : {}),
            },
          });
        }
        return toDeal(updated);
      },
      { signal: ctx.signal },
    );
  };
}
