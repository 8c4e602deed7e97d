import type { PoolClient } from '@workauto/db';
import type { CallContext } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import { SOURCE, pipelineData, type CrmDeps } from '../common.js';

// What the pipeline and stage handlers share.

/** A confidence as the decimal text SQL gets (never a float). */
export const decimalOrNull = (n: number | undefined) => (n === undefined ? undefined : String(n));

export async function stagesByPipeline(
  db: PoolClient | CrmDeps['pool'],
  tenantId: string,
  ids: string[],
): Promise<Map<string, stages.StageRow[]>> {
  const by = new Map<string, stages.StageRow[]>(ids.map((id) => [id, []]));
  for (const s of await stages.listStages(db, tenantId, ids)) by.get(s.pipeline_id)?.push(s);
  return by;
}

/** Unsets (and announces) the tenant's default, for the caller's new one. Call under lockTenantPipelines. */
export async function takeDefault(tx: PoolClient, ctx: CallContext, tenantId: string): Promise<void> {
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
