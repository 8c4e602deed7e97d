import {
  listPage,
  newestFirst,
  shapedStatement,
  updateTenantRow,
  type Columns,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';

export interface PipelineRow {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  currency: string;
  display_order: number;
  is_default: boolean;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const COLUMNS =
  'id, tenant_id, name, description, currency, display_order, is_default, metadata, created_at, updated_at, deleted_at';

/**
 * Serialises the tenant's pipeline-set changes (default flag, display order, create, delete) until
 * the transaction ends: the "exactly one default" and "dense order" rules need to see the whole set.
 */
export async function lockTenantPipelines(db: Queryable, tenantId: string): Promise<void> {
  await db.query(`SELECT pg_advisory_xact_lock(hashtextextended('crm.pipelines:' || $1, 0))`, [tenantId]);
}

export async function insertPipeline(
  db: Queryable,
  p: Pick<
    PipelineRow,
    'id' | 'tenant_id' | 'name' | 'description' | 'currency' | 'display_order' | 'is_default' | 'metadata'
  >,
): Promise<PipelineRow> {
  const { rows } = await db.query<PipelineRow>(
    `INSERT INTO pipelines (id, tenant_id, name, description, currency, display_order, is_default, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${COLUMNS}`,
    [p.id, p.tenant_id, p.name, p.description, p.currency, p.display_order, p.is_default, p.metadata],
  );
  return rows[0]!;
}

export type PipelineLock = 'update' | 'share' | 'key share';

/**
 * A live pipeline of the tenant; `lock` takes a row lock until the transaction ends ('key share'
 * while putting a deal into it: the lock the deal's foreign key takes, taken before the stage's).
 */
export async function findPipeline(
  db: Queryable,
  tenantId: string,
  id: string,
  lock?: PipelineLock,
): Promise<PipelineRow | undefined> {
  const { rows } = await db.query<PipelineRow>(
    shapedStatement(
      `SELECT ${COLUMNS} FROM pipelines WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL${lock ? ` FOR ${lock.toUpperCase()}` : ''}`,
      [tenantId, id],
    ),
  );
  return rows[0];
}

/** The live pipeline of a live stage, in one statement (a deal's move locks the pipeline before the stage). */
export async function findPipelineOfStage(
  db: Queryable,
  tenantId: string,
  stageId: string,
  lock: PipelineLock,
): Promise<PipelineRow | undefined> {
  const { rows } = await db.query<PipelineRow>(
    shapedStatement(
      `SELECT ${COLUMNS} FROM pipelines
        WHERE tenant_id = $1 AND deleted_at IS NULL
          AND id = (SELECT pipeline_id FROM pipeline_stages WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL)
          FOR ${lock.toUpperCase()}`,
      [tenantId, stageId],
    ),
  );
  return rows[0];
}

export async function findDefaultPipeline(
  db: Queryable,
  tenantId: string,
  lock?: PipelineLock,
): Promise<PipelineRow | undefined> {
  const { rows } = await db.query<PipelineRow>(
    shapedStatement(
      `SELECT ${COLUMNS} FROM pipelines WHERE tenant_id = $1 AND is_default AND deleted_at IS NULL${lock ? ` FOR ${lock.toUpperCase()}` : ''}`,
      [tenantId],
    ),
  );
  return rows[0];
}

/** One page, newest first. */
export async function listPipelines(
  db: Queryable,
  tenantId: string,
  page: PageQuery,
): Promise<KeysetPage<PipelineRow>> {
  return listPage<PipelineRow>(
    db,
    {
      columns: COLUMNS,
      from: 'pipelines',
      where: 'tenant_id = $1 AND deleted_at IS NULL',
      params: [tenantId],
      order: newestFirst(),
    },
    page,
  );
}

/** Ids of the tenant's live pipelines in display order (call under lockTenantPipelines). */
export async function pipelineIdsInOrder(db: Queryable, tenantId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM pipelines WHERE tenant_id = $1 AND deleted_at IS NULL ORDER BY display_order, created_at, id`,
    [tenantId],
  );
  return rows.map((r) => r.id);
}

/** Sets display_order 1..n in the order of `ids`; returns the ids whose position changed. */
export async function setPipelineOrder(db: Queryable, tenantId: string, ids: string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `UPDATE pipelines p SET display_order = o.pos, updated_at = now()
       FROM unnest($2::uuid[]) WITH ORDINALITY AS o(id, pos)
      WHERE p.tenant_id = $1 AND p.id = o.id AND p.display_order <> o.pos
      RETURNING p.id`,
    [tenantId, ids],
  );
  return rows.map((r) => r.id);
}

/** Clears the tenant's default flag; returns the pipeline that had it. */
export async function unsetDefault(db: Queryable, tenantId: string): Promise<PipelineRow | undefined> {
  const { rows } = await db.query<PipelineRow>(
    `UPDATE pipelines SET is_default = false, updated_at = now()
      WHERE tenant_id = $1 AND is_default AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId],
  );
  return rows[0];
}

export type PipelinePatch = Partial<
  Pick<PipelineRow, 'name' | 'description' | 'currency' | 'is_default' | 'metadata' | 'deleted_at'>
>;
const PATCH: Columns<PipelinePatch> = {
  name: true,
  description: true,
  currency: true,
  is_default: true,
  metadata: true,
  deleted_at: true,
};

export async function updatePipeline(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: PipelinePatch,
): Promise<PipelineRow> {
  return (await updateTenantRow<PipelineRow>(db, 'pipelines', COLUMNS, tenantId, id, patch, PATCH))!;
}
