import { preparedStatement, type Queryable } from '@workauto/db';

export interface HistoryRow {
  id: string;
  tenant_id: string;
  deal_id: string;
  seq: number;
  from_stage_id: string | null;
  from_stage_name: string | null;
  to_stage_id: string;
  to_stage_name: string;
  /** NUMERIC as text (exact). */
  amount_at_change: string | null;
  confidence_at_change: string | null;
  changed_at: Date;
}

const COLUMNS = `id, tenant_id, deal_id, seq, from_stage_id, from_stage_name, to_stage_id, to_stage_name,
  amount_at_change::text AS amount_at_change, confidence_at_change::text AS confidence_at_change, changed_at`;

/**
 * Appends one stage change to the deal's history. Call it holding the deal's row lock: the next
 * seq is read and written under it, so concurrent moves chain (each from = the previous to).
 */
export async function appendHistory(
  db: Queryable,
  h: Pick<
    HistoryRow,
    | 'id'
    | 'tenant_id'
    | 'deal_id'
    | 'from_stage_id'
    | 'from_stage_name'
    | 'to_stage_id'
    | 'to_stage_name'
    | 'amount_at_change'
    | 'confidence_at_change'
  >,
): Promise<HistoryRow> {
  const { rows } = await db.query<HistoryRow>(
    APPEND_HISTORY([
      h.id,
      h.tenant_id,
      h.deal_id,
      h.from_stage_id,
      h.from_stage_name,
      h.to_stage_id,
      h.to_stage_name,
      h.amount_at_change,
      h.confidence_at_change,
    ]),
  );
  return rows[0]!;
}

/** Every move's insert, prepared once per connection (it was planned on every call). */
const APPEND_HISTORY = preparedStatement(
  'crm_history_append',
  `INSERT INTO deal_stage_history (id, tenant_id, deal_id, seq, from_stage_id, from_stage_name, to_stage_id, to_stage_name, amount_at_change, confidence_at_change)
   VALUES ($1, $2, $3, (SELECT coalesce(max(seq), 0) + 1 FROM deal_stage_history WHERE deal_id = $3), $4, $5, $6, $7, $8, $9)
   RETURNING ${COLUMNS}`,
);

/**
 * The deal's last `limit` changes, oldest first: the list has no pages and a deal moved all day
 * would otherwise answer more than one message holds (the UNIQUE (deal_id, seq) index serves it).
 */
export async function listHistory(
  db: Queryable,
  tenantId: string,
  dealId: string,
  limit: number,
): Promise<HistoryRow[]> {
  const { rows } = await db.query<HistoryRow>(
    `SELECT ${COLUMNS} FROM (SELECT ${COLUMNS} FROM deal_stage_history WHERE tenant_id = $1 AND deal_id = $2
                               ORDER BY seq DESC LIMIT $3) last ORDER BY seq`,
    [tenantId, dealId, limit],
  );
  return rows;
}
