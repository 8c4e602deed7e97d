import { newId, type PoolClient } from '@workauto/db';
import { errors, validate, type CallContext } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { amountProblem } from '../../domain/money.js';
import * as contacts from '../../repo/contacts.js';
import * as deals from '../../repo/deals.js';
import * as history from '../../repo/history.js';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import { SOURCE, dealData, historyData } from '../common.js';

// What the deal handlers share: the money and contact checks, where a deal goes (locked), a move's history.

/** Fails with field violations unless the deal's currency is the pipeline's and the amount fits it. */
export function checkMoney(pipeline: pipelines.PipelineRow, currency: string, amount: number | undefined): void {
  const v = validate();
  if (currency !== pipeline.currency) {
    v.add('currency', `must be ${pipeline.currency}, the currency of pipeline ${pipeline.id} (got ${currency})`);
  }
  const problem = amount === undefined ? undefined : amountProblem(amount, pipeline.currency);
  if (problem) v.add('amount', problem);
  v.done();
}

export async function checkContact(
  tx: PoolClient,
  tenantId: string,
  contactId: string | null | undefined,
): Promise<void> {
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
export async function lockPlacement(
  tx: PoolClient,
  tenantId: string,
  to: { stageId?: string | undefined; pipelineId?: string | undefined },
): Promise<{ pipeline: pipelines.PipelineRow; stage: stages.StageRow }> {
  if (to.stageId) {
    // The stage's pipeline is found and locked in one statement (a stage never changes pipeline).
    const pipeline = await pipelines.findPipelineOfStage(tx, tenantId, to.stageId, 'key share');
    if (!pipeline) throw errors.invalidField('stage_id', `no stage ${to.stageId} in this tenant`);
    const stage = await lockStage(tx, tenantId, to.stageId, 'stage_id');
    if (to.pipelineId && stage.pipeline_id !== to.pipelineId)
      throw errors.invalidField('stage_id', `must be a stage of pipeline ${to.pipelineId}`);
    return { pipeline, stage };
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

export async function writeMove(
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
