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
} from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type {
  CrmPipelinesServiceService,
  PipelineSummary,
} from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { minorUnitDigits, normalizeCurrency } from '../domain/money.js';
import { moveTo, orderOfInputs } from '../domain/ordering.js';
import type { StageType } from '../repo/stages.js';
import * as deals from '../repo/deals.js';
import * as pipelines from '../repo/pipelines.js';
import * as stages from '../repo/stages.js';
import { pipelineSummary } from '../repo/summary.js';
import {
  LIMITS,
  SOURCE,
  dealData,
  pipelineData,
  stageData,
  stageTypes,
  toPipeline,
  toStage,
  type CrmDeps,
} from './common.js';
import { checkConfidence, checkCurrency, checkPosition } from './validation.js';

type H = Handlers<typeof CrmPipelinesServiceService>;

const decimalOrNull = (n: number | undefined) => (n === undefined ? undefined : String(n));

async function stagesByPipeline(
  db: PoolClient | CrmDeps['pool'],
  tenantId: string,
  ids: string[],
): Promise<Map<string, stages.StageRow[]>> {
  const by = new Map<string, stages.StageRow[]>(ids.map((id) => [id, []]));
  for (const s of await stages.listStages(db, tenantId, ids)) by.get(s.pipeline_id)?.push(s);
  return by;
}

/** Makes `id` the tenant's default, unsetting (and announcing) the previous one. Call under lockTenantPipelines. */
async function takeDefault(tx: PoolClient, ctx: CallContext, tenantId: string): Promise<void> {
  const previous = await pipelines.unsetDefault(tx, tenantId);
  if (previous) {
    await recordEvent(tx, SOURCE, ctx, {
      type: 'pipeline.updated',
      resourceType: 'pipeline',
      resourceId: previous.id,
      data: pipelineData(previous, await stages.listStages(tx, tenantId, [previous.id])),
      metadata: { is_default: false },
    });
  }
}

export function pipelineHandlers({
  pool,
}: CrmDeps): Pick<
  H,
  | 'createPipeline'
  | 'listPipelines'
  | 'getPipeline'
  | 'updatePipeline'
  | 'deletePipeline'
  | 'getPipelineSummary'
  | 'createPipelineStage'
  | 'updatePipelineStage'
  | 'deletePipelineStage'
> {
  return {
    async createPipeline(req, ctx) {
      const v = validate()
        .text('name', req.name, { required: true, max: LIMITS.name })
        .text('description', req.description, { min: 0, max: LIMITS.description })
        .check(req.stages.length <= LIMITS.stagesPerPipeline, 'stages', `at most ${LIMITS.stagesPerPipeline} stages`);
      checkCurrency(v, 'currency', req.currency);
      checkMetadata(v, 'metadata', req.metadata);
      req.stages.forEach((s, i) => {
        v.text(`stages[${i}].name`, s.name, { required: true, max: LIMITS.name });
        checkEnum(v, `stages[${i}].stage_type`, s.stage_type, stageTypes, true);
        checkConfidence(v, `stages[${i}].default_confidence`, s.default_confidence);
        checkMetadata(v, `stages[${i}].metadata`, s.metadata);
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
    },

    async listPipelines(req, ctx) {
      const page = parsePage(req);
      const listed = await pipelines.listPipelines(pool, ctx.tenant, page);
      const by = await stagesByPipeline(
        pool,
        ctx.tenant,
        listed.rows.map((r) => r.id),
      );
      return toPage(listed, (r) => toPipeline(r, by.get(r.id) ?? []));
    },

    async getPipeline(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const row = await pipelines.findPipeline(pool, ctx.tenant, req.id);
      if (!row) throw errors.notFound('pipeline', req.id);
      return toPipeline(row, await stages.listStages(pool, ctx.tenant, [row.id]));
    },

    async updatePipeline(patchRequest, ctx) {
      const v = validate();
      const { req } = patchNulls(patchRequest, { text: ['description'] }, v);
      v.uuid('id', req.id, { required: true })
        .text('name', req.name, { max: LIMITS.name })
        .text('description', req.description, { min: 0, max: LIMITS.description });
      checkCurrency(v, 'currency', req.currency);
      checkPosition(v, 'display_order', req.display_order);
      checkMetadata(v, 'metadata', req.metadata).done();
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
    },

    async deletePipeline(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const tenantId = ctx.tenant;
      return withTransaction(
        pool,
        async (tx) => {
          await pipelines.lockTenantPipelines(tx, tenantId);
          const current = await pipelines.findPipeline(tx, tenantId, req.id, 'update');
          if (!current) throw errors.notFound('pipeline', req.id);
          // Stage locks first: a deal being created in one of them commits before the check below.
          await stages.lockStagesOf(tx, tenantId, current.id);
          if (await deals.hasLiveDeals(tx, tenantId, current.id)) {
            throw errors.failedPrecondition(
              'PIPELINE_HAS_DEALS',
              'the pipeline still holds deals: move or delete them first',
            );
          }
          await stages.softDeleteStagesOf(tx, tenantId, current.id);
          const deleted = await pipelines.updatePipeline(tx, tenantId, current.id, {
            deleted_at: new Date(),
            is_default: false,
          });
          const rest = await pipelines.pipelineIdsInOrder(tx, tenantId);
          await pipelines.setPipelineOrder(tx, tenantId, rest);
          if (current.is_default && rest[0]) {
            // The tenant keeps a default: the first remaining pipeline in display order.
            const promoted = await pipelines.updatePipeline(tx, tenantId, rest[0], { is_default: true });
            await recordEvent(tx, SOURCE, ctx, {
              type: 'pipeline.updated',
              resourceType: 'pipeline',
              resourceId: promoted.id,
              data: pipelineData(promoted, await stages.listStages(tx, tenantId, [promoted.id])),
              metadata: { is_default: true },
            });
          }
          await recordEvent(tx, SOURCE, ctx, {
            type: 'pipeline.deleted',
            resourceType: 'pipeline',
            resourceId: deleted.id,
            data: pipelineData(deleted, []),
            metadata: { deleted_at: deleted.deleted_at },
          });
          return {};
        },
        { signal: ctx.signal },
      );
    },

    async getPipelineSummary(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
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
    },

    async createPipelineStage(req, ctx) {
      const v = validate()
        .uuid('pipeline_id', req.pipeline_id, { required: true })
        .text('name', req.name, { required: true, max: LIMITS.name });
      checkEnum(v, 'stage_type', req.stage_type, stageTypes, true);
      checkConfidence(v, 'default_confidence', req.default_confidence);
      checkPosition(v, 'display_order', req.display_order);
      checkMetadata(v, 'metadata', req.metadata).done();
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
    },

    async updatePipelineStage(patchRequest, ctx) {
      const v = validate();
      const { req, cleared } = patchNulls(patchRequest, { other: ['default_confidence'] }, v);
      v.uuid('pipeline_id', req.pipeline_id, { required: true })
        .uuid('stage_id', req.stage_id, { required: true })
        .text('name', req.name, { max: LIMITS.name });
      checkEnum(v, 'stage_type', req.stage_type, stageTypes, false);
      checkConfidence(v, 'default_confidence', req.default_confidence);
      checkPosition(v, 'display_order', req.display_order);
      checkMetadata(v, 'metadata', req.metadata).done();
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
    },

    async deletePipelineStage(req, ctx) {
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
    },
  };
}
