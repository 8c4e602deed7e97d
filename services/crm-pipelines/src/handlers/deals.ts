import { newId, withTransaction, type PoolClient } from '@workauto/db';
import {
  errors,
  parsePage,
  toPage,
  validate,
  type CallContext,
  type Handlers,
  patchNulls,
  changedFields,
  checkEnum,
  checkMetadata,
  textOrNull,
  checkId,
  checkDate,
} from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { CrmPipelinesServiceService } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import {
  amountDecimal,
  amountProblem,
  amountRangeProblem,
  normalizeCurrency,
  storedAmountProblem,
} from '../domain/money.js';
import type { StageType } from '../repo/stages.js';
import * as contacts from '../repo/contacts.js';
import * as deals from '../repo/deals.js';
import * as history from '../repo/history.js';
import * as pipelines from '../repo/pipelines.js';
import * as stages from '../repo/stages.js';
import { LIMITS, SOURCE, dealData, dealStatuses, historyData, toDeal, toHistory, type CrmDeps } from './common.js';
import { checkConfidence, checkCurrency } from './validation.js';

type H = Handlers<typeof CrmPipelinesServiceService>;

/** An optional id that an empty string clears (PATCH). */

/** Fails with field violations unless the deal's currency is the pipeline's and the amount fits it. */
function checkMoney(pipeline: pipelines.PipelineRow, currency: string, amount: number | undefined): void {
  const v = validate();
  if (currency !== pipeline.currency) {
    v.add('currency', `must be ${pipeline.currency}, the currency of pipeline ${pipeline.id} (got ${currency})`);
  }
  const problem = amount === undefined ? undefined : amountProblem(amount, pipeline.currency);
  if (problem) v.add('amount', problem);
  v.done();
}

async function checkContact(tx: PoolClient, tenantId: string, contactId: string | null | undefined): Promise<void> {
  if (contactId && !(await contacts.findContact(tx, tenantId, contactId))) {
    throw errors.invalidField('contact_id', `no contact ${contactId} in this tenant`);
  }
}

/** A live stage, locked FOR SHARE until the transaction ends so it cannot be deleted under the deal. */
async function lockStage(tx: PoolClient, tenantId: string, stageId: string, field: string): Promise<stages.StageRow> {
  const stage = await stages.findStage(tx, tenantId, stageId, { lock: 'share' });
  if (!stage) throw errors.invalidField(field, `no stage ${stageId} in this tenant`);
  return stage;
}

/** The first open stage of a pipeline, locked; a pipeline without one cannot take deals. */
async function lockFirstOpenStage(
  tx: PoolClient,
  tenantId: string,
  pipeline: pipelines.PipelineRow,
): Promise<stages.StageRow> {
  const first = await stages.firstOpenStage(tx, tenantId, pipeline.id);
  const stage = first && (await stages.findStage(tx, tenantId, first.id, { lock: 'share' }));
  if (!stage)
    throw errors.failedPrecondition(
      'NO_OPEN_STAGE',
      `pipeline ${pipeline.id} has no open stage to put the deal in; add one, or give stage_id`,
    );
  return stage;
}

/**
 * Where a deal goes (a stage, else a pipeline's first open stage, else the default pipeline's),
 * locked pipeline first, then stage, as every pipeline and stage change does (pipeline FOR UPDATE,
 * then its stages, then the deals it moves): called before the deal's own row lock, it makes a
 * deal created or moved while its stage or pipeline changes wait instead of deadlocking. The
 * pipeline's lock is KEY SHARE (what the deal's foreign key takes anyway; deal changes do not
 * block each other), and it is read after the wait, so a pipeline deleted meanwhile is not found
 * and its new currency is seen.
 */
async function lockPlacement(
  tx: PoolClient,
  tenantId: string,
  to: { stageId?: string | undefined; pipelineId?: string | undefined },
): Promise<{ pipeline: pipelines.PipelineRow; stage: stages.StageRow }> {
  if (to.stageId) {
    const unlocked = await stages.findStage(tx, tenantId, to.stageId);
    if (!unlocked) throw errors.invalidField('stage_id', `no stage ${to.stageId} in this tenant`);
    if (to.pipelineId && unlocked.pipeline_id !== to.pipelineId)
      throw errors.invalidField('stage_id', `must be a stage of pipeline ${to.pipelineId}`);
    const pipeline = await pipelines.findPipeline(tx, tenantId, unlocked.pipeline_id, 'key share');
    if (!pipeline) throw errors.invalidField('stage_id', `no stage ${to.stageId} in this tenant`);
    return { pipeline, stage: await lockStage(tx, tenantId, to.stageId, 'stage_id') };
  }
  const pipeline = to.pipelineId
    ? await pipelines.findPipeline(tx, tenantId, to.pipelineId, 'key share')
    : await pipelines.findDefaultPipeline(tx, tenantId, 'key share');
  if (!pipeline) {
    if (to.pipelineId) throw errors.invalidField('pipeline_id', `no pipeline ${to.pipelineId} in this tenant`);
    throw errors.failedPrecondition('NO_PIPELINE', 'the tenant has no pipeline yet: create one first');
  }
  return { pipeline, stage: await lockFirstOpenStage(tx, tenantId, pipeline) };
}

async function writeMove(
  tx: PoolClient,
  ctx: CallContext,
  deal: deals.DealRow,
  from: { id: string; name: string } | null,
): Promise<history.HistoryRow> {
  const row = await history.appendHistory(tx, {
    id: newId(),
    tenant_id: deal.tenant_id,
    deal_id: deal.id,
    from_stage_id: from?.id ?? null,
    from_stage_name: from?.name ?? null,
    to_stage_id: deal.stage_id,
    to_stage_name: deal.stage_name,
    amount_at_change: deal.amount,
    confidence_at_change: deal.confidence,
  });
  if (from) {
    await recordEvent(tx, SOURCE, ctx, {
      type: 'deal.stage_changed',
      resourceType: 'deal',
      resourceId: deal.id,
      parent: { type: 'pipeline', id: deal.pipeline_id },
      data: dealData(deal),
      metadata: {
        from_stage_id: from.id,
        from_stage_name: from.name,
        to_stage_id: deal.stage_id,
        to_stage_name: deal.stage_name,
        history_entry: historyData(row),
      },
    });
  }
  return row;
}

export function dealHandlers({
  pool,
}: CrmDeps): Pick<H, 'createDeal' | 'listDeals' | 'getDeal' | 'updateDeal' | 'deleteDeal' | 'listDealHistory'> {
  return {
    async createDeal(req, ctx) {
      const v = validate()
        .text('title', req.title, { required: true, max: LIMITS.title })
        .uuid('pipeline_id', req.pipeline_id)
        .uuid('stage_id', req.stage_id)
        .uuid('contact_id', req.contact_id)
        .uuid('owner_id', req.owner_id);
      if (req.amount !== undefined && amountRangeProblem(req.amount)) v.add('amount', amountRangeProblem(req.amount)!);
      checkCurrency(v, 'currency', req.currency);
      checkConfidence(v, 'confidence', req.confidence);
      checkDate(v, 'expected_close_date', req.expected_close_date, false);
      checkMetadata(v, 'metadata', req.metadata).done();
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
    },

    async listDeals(req, ctx) {
      const v = validate()
        .uuid('pipeline_id', req.pipeline_id)
        .uuid('stage_id', req.stage_id)
        .uuid('owner_id', req.owner_id)
        .uuid('contact_id', req.contact_id);
      checkEnum(v, 'status', req.status, dealStatuses, false).done();
      const page = parsePage(req);
      const listed = await deals.listDeals(
        pool,
        ctx.tenant,
        {
          pipeline_id: req.pipeline_id || undefined,
          stage_id: req.stage_id || undefined,
          status: dealStatuses.toDomain(req.status) as StageType | undefined,
          owner_id: req.owner_id || undefined,
          contact_id: req.contact_id || undefined,
        },
        page,
      );
      return toPage(listed, toDeal);
    },

    async getDeal(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const row = await deals.findDeal(pool, ctx.tenant, req.id);
      if (!row) throw errors.notFound('deal', req.id);
      return toDeal(row);
    },

    async updateDeal(patchRequest, ctx) {
      const v = validate();
      // null clears: text and ids as '' does; confidence goes back to unset (the stage's default applies).
      const { req, cleared } = patchNulls(
        patchRequest,
        { text: ['contact_id', 'owner_id', 'expected_close_date'], other: ['confidence'] },
        v,
      );
      v.uuid('id', req.id, { required: true })
        .text('title', req.title, { max: LIMITS.title })
        .uuid('pipeline_id', req.pipeline_id)
        .uuid('stage_id', req.stage_id);
      checkId(v, 'contact_id', req.contact_id, true);
      checkId(v, 'owner_id', req.owner_id, true);
      if (req.amount !== undefined && amountRangeProblem(req.amount)) v.add('amount', amountRangeProblem(req.amount)!);
      checkCurrency(v, 'currency', req.currency);
      checkConfidence(v, 'confidence', req.confidence);
      checkDate(v, 'expected_close_date', req.expected_close_date, true);
      checkMetadata(v, 'metadata', req.metadata).done();
      const tenantId = ctx.tenant;
      return withTransaction(
        pool,
        async (tx) => {
          // Target first (pipeline, stage), then the deal, in the order of stage and pipeline changes.
          const movesTo = (deal: deals.DealRow) =>
            Boolean(req.stage_id || (req.pipeline_id && req.pipeline_id !== deal.pipeline_id));
          const place = () => lockPlacement(tx, tenantId, { stageId: req.stage_id, pipelineId: req.pipeline_id });
          const before = await deals.findDeal(tx, tenantId, req.id);
          if (!before) throw errors.notFound('deal', req.id);
          let placement = movesTo(before) ? await place() : undefined;
          // The deal's row lock orders concurrent changes: each move reads the stage the previous one left.
          const current = await deals.findDeal(tx, tenantId, req.id, { forUpdate: true });
          if (!current) throw errors.notFound('deal', req.id);
          if (!placement && movesTo(current)) placement = await place(); // it changed pipeline meanwhile (rare)
          const target = placement?.stage;
          const moves = target !== undefined && target.id !== current.stage_id;
          const pipeline = placement?.pipeline ?? (await pipelines.findPipeline(tx, tenantId, current.pipeline_id))!;
          // The deal's currency is its pipeline's (contract §5): a move changes it, and the amount kept
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
            ...(moves ? { pipeline_id: target!.pipeline_id, stage_id: target!.id } : {}),
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
    },

    async deleteDeal(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
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
    },

    async listDealHistory(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const deal = await deals.findDeal(pool, ctx.tenant, req.id);
      if (!deal) throw errors.notFound('deal', req.id);
      return { data: (await history.listHistory(pool, ctx.tenant, deal.id, LIMITS.historyEntries)).map(toHistory) };
    },
  };
}
