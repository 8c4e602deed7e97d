import {
  listPage,
  newestFirst,
  newId,
  preparedStatement,
  updateTenantRow,
  type Columns,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';
import type { StageType } from './stages.js';

export interface DealRow {
  id: string;
  tenant_id: string;
  pipeline_id: string;
  stage_id: string;
  title: string;
  /** NUMERIC as text (exact). */
  amount: string;
  currency: string;
  /** NUMERIC as text (exact). */
  confidence: string | null;
  contact_id: string | null;
  owner_id: string | null;
  /** YYYY-MM-DD */
  expected_close_date: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  /** The stage's stage_type: a deal's status is derived, never stored. */
  status: StageType;
  /** The stage's name (for history rows and events; not a field of the API's Deal). */
  stage_name: string;
}

/** The deal's own columns, of table (or alias) `d`. */
const dealColumns = (d: string) => `${d}.id, ${d}.tenant_id, ${d}.pipeline_id, ${d}.stage_id, ${d}.title,
  ${d}.amount::text AS amount, ${d}.currency, ${d}.confidence::text AS confidence, ${d}.contact_id, ${d}.owner_id,
  ${d}.expected_close_date::text AS expected_close_date, ${d}.metadata, ${d}.created_at, ${d}.updated_at, ${d}.deleted_at`;
const COLUMNS = `${dealColumns('d')}, s.stage_type AS status, s.name AS stage_name`;
/**
 * COLUMNS with the stage's fields looked up by the row's stage_id as the statement ends with it:
 * an update's new stage, or a locked row's stage after a wait for a concurrent move (a join would
 * keep the stage row it matched before the wait, and lose the deal).
 */
const columnsByStageOf = (d: string) => `${dealColumns(d)},
  (SELECT s.stage_type FROM pipeline_stages s WHERE s.tenant_id = ${d}.tenant_id AND s.id = ${d}.stage_id) AS status,
  (SELECT s.name FROM pipeline_stages s WHERE s.tenant_id = ${d}.tenant_id AND s.id = ${d}.stage_id) AS stage_name`;
const FROM = 'deals d JOIN pipeline_stages s ON s.id = d.stage_id';

export type NewDeal = Omit<DealRow, 'created_at' | 'updated_at' | 'deleted_at' | 'status' | 'stage_name'>;

/** Inserts a deal and returns it with its stage's fields, in one statement (its stage is locked by the caller). */
export async function insertDeal(db: Queryable, d: NewDeal): Promise<DealRow> {
  const { rows } = await db.query<DealRow>(
    INSERT_DEAL([
      d.id,
      d.tenant_id,
      d.pipeline_id,
      d.stage_id,
      d.title,
      d.amount,
      d.currency,
      d.confidence,
      d.contact_id,
      d.owner_id,
      d.expected_close_date,
      d.metadata,
    ]),
  );
  return rows[0]!;
}

const INSERT_DEAL = preparedStatement(
  'deals_insert',
  `INSERT INTO deals (id, tenant_id, pipeline_id, stage_id, title, amount, currency, confidence, contact_id, owner_id, expected_close_date, metadata)
   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING ${columnsByStageOf('deals')}`,
);

/** A deal whose stage its statement could not see (findDeal). */
type StagelessDeal = Omit<DealRow, 'status' | 'stage_name'> & Record<'status' | 'stage_name', null>;

/** A live deal of the tenant; `forUpdate` locks it (every change of a deal goes through this lock). */
export async function findDeal(
  db: Queryable,
  tenantId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<DealRow | undefined> {
  if (opts.forUpdate) {
    // Locked and read in one statement, its stage by subqueries (columnsByStageOf). Those read
    // with the statement's snapshot, taken before any wait for the lock: a deal moved meanwhile
    // into a stage created after it finds no stage there, and is read again.
    const { rows } = await db.query<DealRow | StagelessDeal>(LOCK_DEAL([tenantId, id]));
    const locked = rows[0];
    if (!locked) return undefined;
    if (locked.status !== null) return locked;
  }
  const { rows } = await db.query<DealRow>(FIND_DEAL([tenantId, id]));
  return rows[0];
}

/** The busiest statements (every GET and change of a deal), prepared once per connection. */
const LOCK_DEAL = preparedStatement<[string, string]>(
  'deals_lock',
  `SELECT ${columnsByStageOf('d')} FROM deals d WHERE d.tenant_id = $1 AND d.id = $2 AND d.deleted_at IS NULL FOR UPDATE`,
);
const FIND_DEAL = preparedStatement<[string, string]>(
  'deals_find',
  `SELECT ${COLUMNS} FROM ${FROM} WHERE d.tenant_id = $1 AND d.id = $2 AND d.deleted_at IS NULL`,
);

export interface DealFilters {
  pipeline_id?: string | undefined;
  stage_id?: string | undefined;
  status?: StageType | undefined;
  owner_id?: string | undefined;
  contact_id?: string | undefined;
}

/** One page of the filtered deals, newest first. */
export async function listDeals(
  db: Queryable,
  tenantId: string,
  f: DealFilters,
  page: PageQuery,
): Promise<KeysetPage<DealRow>> {
  return listPage<DealRow>(
    db,
    {
      columns: COLUMNS,
      from: FROM,
      where: `d.tenant_id = $1 AND d.deleted_at IS NULL
        AND ($2::uuid IS NULL OR d.pipeline_id = $2)
        AND ($3::uuid IS NULL OR d.stage_id = $3)
        AND ($4::text IS NULL OR s.stage_type = $4)
        AND ($5::uuid IS NULL OR d.owner_id = $5)
        AND ($6::uuid IS NULL OR d.contact_id = $6)`,
      params: [
        tenantId,
        f.pipeline_id ?? null,
        f.stage_id ?? null,
        f.status ?? null,
        f.owner_id ?? null,
        f.contact_id ?? null,
      ],
      order: newestFirst('d'),
    },
    page,
  );
}

export type DealPatch = Partial<
  Pick<
    DealRow,
    | 'title'
    | 'pipeline_id'
    | 'stage_id'
    | 'amount'
    | 'currency'
    | 'confidence'
    | 'contact_id'
    | 'owner_id'
    | 'expected_close_date'
    | 'metadata'
    | 'deleted_at'
  >
>;
const PATCH: Columns<DealPatch> = {
  title: true,
  pipeline_id: true,
  stage_id: true,
  amount: true,
  currency: true,
  confidence: true,
  contact_id: true,
  owner_id: true,
  expected_close_date: true,
  metadata: true,
  deleted_at: true,
};

/** Changes a deal and returns it as the change left it (deleted too: a delete is an update of deleted_at), in one statement. */
export async function updateDeal(db: Queryable, tenantId: string, id: string, patch: DealPatch): Promise<DealRow> {
  return (await updateTenantRow<DealRow>(db, 'deals', columnsByStageOf('deals'), tenantId, id, patch, PATCH))!;
}

/** Whether any live deal is in the stage (or, without a stage, in the pipeline). */
export async function hasLiveDeals(
  db: Queryable,
  tenantId: string,
  pipelineId: string,
  stageId?: string,
): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM deals WHERE tenant_id = $1 AND pipeline_id = $2 AND ($3::uuid IS NULL OR stage_id = $3) AND deleted_at IS NULL LIMIT 1`,
    [tenantId, pipelineId, stageId ?? null],
  );
  return rows.length > 0;
}

/**
 * Moves every live deal of one stage to another of the same pipeline and writes each move to
 * the deals' history, in two statements. Returns the moved deals as they are now.
 */
export async function moveDealsBetweenStages(
  db: Queryable,
  tenantId: string,
  from: { id: string; name: string },
  to: { id: string; name: string },
): Promise<DealRow[]> {
  const { rows: moved } = await db.query<{ id: string }>(
    `UPDATE deals SET stage_id = $3, updated_at = now()
      WHERE tenant_id = $1 AND stage_id = $2 AND deleted_at IS NULL RETURNING id`,
    [tenantId, from.id, to.id],
  );
  if (moved.length === 0) return [];
  const ids = moved.map((r) => r.id);
  await db.query(
    `INSERT INTO deal_stage_history (id, tenant_id, deal_id, seq, from_stage_id, from_stage_name, to_stage_id, to_stage_name, amount_at_change, confidence_at_change)
     SELECT m.history_id, d.tenant_id, d.id,
            (SELECT coalesce(max(h.seq), 0) + 1 FROM deal_stage_history h WHERE h.deal_id = d.id),
            $4, $5, $6, $7, d.amount, d.confidence
       FROM unnest($2::uuid[], $3::uuid[]) AS m(deal_id, history_id)
       JOIN deals d ON d.id = m.deal_id AND d.tenant_id = $1`,
    [tenantId, ids, ids.map(() => newId()), from.id, from.name, to.id, to.name],
  );
  const { rows } = await db.query<DealRow>(
    `SELECT ${COLUMNS} FROM ${FROM} WHERE d.tenant_id = $1 AND d.id = ANY($2::uuid[]) ORDER BY d.id`,
    [tenantId, ids],
  );
  return rows;
}
