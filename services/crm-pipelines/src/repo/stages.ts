import { shapedStatement, updateTenantRow, type Columns } from '@workauto/db';
import type { Queryable } from '@workauto/db';

/** A stage's type: how its deals weigh in the pipeline summary (repo/summary.ts). */
export type StageType = 'open' | 'won' | 'lost';

export interface StageRow {
  id: string;
  tenant_id: string;
  pipeline_id: string;
  name: string;
  stage_type: StageType;
  /** NUMERIC as text (exact). */
  default_confidence: string | null;
  display_order: number;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, tenant_id, pipeline_id, name, stage_type, default_confidence::text AS default_confidence, display_order, metadata, created_at, updated_at';

export type NewStage = Pick<
  StageRow,
  'id' | 'tenant_id' | 'pipeline_id' | 'name' | 'stage_type' | 'default_confidence' | 'display_order' | 'metadata'
>;

/** Inserts several stages in one statement; returns them in display order. */
export async function insertStages(db: Queryable, stages: NewStage[]): Promise<StageRow[]> {
  if (stages.length === 0) return [];
  const { rows } = await db.query<StageRow>(
    `INSERT INTO pipeline_stages (id, tenant_id, pipeline_id, name, stage_type, default_confidence, display_order, metadata)
     SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::numeric[], $7::int[], $8::jsonb[])
     RETURNING ${COLUMNS}`,
    [
      stages.map((s) => s.id),
      stages.map((s) => s.tenant_id),
      stages.map((s) => s.pipeline_id),
      stages.map((s) => s.name),
      stages.map((s) => s.stage_type),
      stages.map((s) => s.default_confidence),
      stages.map((s) => s.display_order),
      stages.map((s) => JSON.stringify(s.metadata)),
    ],
  );
  return rows.sort((a, b) => a.display_order - b.display_order);
}

/** Live stages of the pipelines, each pipeline's in display order. */
export async function listStages(db: Queryable, tenantId: string, pipelineIds: string[]): Promise<StageRow[]> {
  if (pipelineIds.length === 0) return [];
  const { rows } = await db.query<StageRow>(
    `SELECT ${COLUMNS} FROM pipeline_stages
      WHERE tenant_id = $1 AND pipeline_id = ANY($2::uuid[]) AND deleted_at IS NULL
      ORDER BY pipeline_id, display_order, id`,
    [tenantId, pipelineIds],
  );
  return rows;
}

/**
 * A live stage; with `pipelineId` it must be of that pipeline. `lock`: 'update' for changes to
 * the stage, 'share' while putting a deal into it (so it cannot be deleted under the deal).
 */
export async function findStage(
  db: Queryable,
  tenantId: string,
  id: string,
  opts: { pipelineId?: string; lock?: 'update' | 'share' } = {},
): Promise<StageRow | undefined> {
  // Each (pipeline given, lock) is its own prepared shape: a move reads its stage twice per call.
  const values = opts.pipelineId === undefined ? [tenantId, id] : [tenantId, id, opts.pipelineId];
  const { rows } = await db.query<StageRow>(
    shapedStatement(
      `SELECT ${COLUMNS} FROM pipeline_stages
        WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL${opts.pipelineId === undefined ? '' : ' AND pipeline_id = $3'}${
          opts.lock ? ` FOR ${opts.lock.toUpperCase()}` : ''
        }`,
      values,
    ),
  );
  return rows[0];
}

/** The first open stage of the pipeline in display order: where a new deal goes by default. */
export async function firstOpenStage(
  db: Queryable,
  tenantId: string,
  pipelineId: string,
): Promise<StageRow | undefined> {
  const { rows } = await db.query<StageRow>(
    `SELECT ${COLUMNS} FROM pipeline_stages
      WHERE tenant_id = $1 AND pipeline_id = $2 AND stage_type = 'open' AND deleted_at IS NULL
      ORDER BY display_order LIMIT 1`,
    [tenantId, pipelineId],
  );
  return rows[0];
}

/** Locks every live stage of the pipeline (pipeline delete and currency change: no deal may slip in). */
export async function lockStagesOf(db: Queryable, tenantId: string, pipelineId: string): Promise<void> {
  await db.query(
    `SELECT id FROM pipeline_stages WHERE tenant_id = $1 AND pipeline_id = $2 AND deleted_at IS NULL ORDER BY id FOR UPDATE`,
    [tenantId, pipelineId],
  );
}

export type StagePatch = Partial<Pick<StageRow, 'name' | 'stage_type' | 'default_confidence' | 'metadata'>>;
const PATCH: Columns<StagePatch> = { name: true, stage_type: true, default_confidence: true, metadata: true };

export async function updateStage(db: Queryable, tenantId: string, id: string, patch: StagePatch): Promise<StageRow> {
  return (await updateTenantRow<StageRow>(db, 'pipeline_stages', COLUMNS, tenantId, id, patch, PATCH))!;
}

/** Sets display_order 1..n in the order of `ids`. */
export async function setStageOrder(db: Queryable, tenantId: string, pipelineId: string, ids: string[]): Promise<void> {
  await db.query(
    `UPDATE pipeline_stages s SET display_order = o.pos, updated_at = now()
       FROM unnest($3::uuid[]) WITH ORDINALITY AS o(id, pos)
      WHERE s.tenant_id = $1 AND s.pipeline_id = $2 AND s.id = o.id AND s.display_order <> o.pos`,
    [tenantId, pipelineId, ids],
  );
}

export async function softDeleteStage(db: Queryable, tenantId: string, id: string): Promise<StageRow> {
  const { rows } = await db.query<StageRow>(
    `UPDATE pipeline_stages SET deleted_at = now(), updated_at = now() WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [tenantId, id],
  );
  return rows[0]!;
}

export async function softDeleteStagesOf(db: Queryable, tenantId: string, pipelineId: string): Promise<void> {
  await db.query(
    `UPDATE pipeline_stages SET deleted_at = now(), updated_at = now() WHERE tenant_id = $1 AND pipeline_id = $2 AND deleted_at IS NULL`,
    [tenantId, pipelineId],
  );
}
