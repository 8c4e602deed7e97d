import {
  listPage,
  newestFirst,
  preparedStatement,
  type KeysetCursor,
  type KeysetPage,
  type ListQuery,
  type PageQuery,
  type Queryable,
} from '@workauto/db';
import type { AuditEntryRow } from '../domain/audit-export.js';

export type AuditRow = AuditEntryRow;

/** Idempotent on the event id: a redelivered event is not recorded twice. */
export function insertAuditEntry(db: Queryable, e: AuditRow): Promise<void> {
  return insertAuditEntries(db, [e]);
}

/**
 * Entries in one statement (the audit consumer's batch, the audit tail's last step: one round trip
 * however many changes it carries), prepared once per connection; idempotent on the event ids.
 */
export async function insertAuditEntries(db: Queryable, entries: AuditRow[]): Promise<void> {
  await db.query(INSERT_AUDIT_ENTRIES([JSON.stringify(entries)]));
}

const INSERT_AUDIT_ENTRIES = preparedStatement<[string]>(
  'audit_log_insert_many',
  `INSERT INTO audit_log (id, tenant_id, action, actor_id, actor_type, resource_type, resource_id, ip_address, user_agent, metadata, created_at, member_id)
   SELECT id, tenant_id, action, actor_id, actor_type, resource_type, resource_id, ip_address, user_agent, coalesce(metadata, '{}'), created_at, member_id
     FROM jsonb_to_recordset($1::jsonb) AS e(id uuid, tenant_id uuid, action text, actor_id text, actor_type text, resource_type text,
          resource_id text, ip_address text, user_agent text, metadata jsonb, created_at timestamptz, member_id uuid)
   ON CONFLICT (id) DO NOTHING`,
);

/** The filters of the list and the export; each one present narrows the entries. */
export interface AuditFilter {
  action?: string | undefined;
  resource_type?: string | undefined;
  actor_id?: string | undefined;
  member_id?: string | undefined;
  resource_id?: string | undefined;
  /** created_at at or after (inclusive). */
  from?: Date | undefined;
  /** created_at before (exclusive). */
  to?: Date | undefined;
}

const COLUMNS =
  'id, tenant_id, action, actor_id, actor_type, resource_type, resource_id, ip_address, user_agent, metadata, created_at, member_id';

/**
 * The tenant's entries matching a filter, as a list query without order and paging. Only the
 * filters given become conditions (no `$n IS NULL OR …`), so the planner sees plain equalities and
 * picks the index of the most selective one (migrations 0002 to 0005 and 0007, docs/identity.md).
 */
function filtered(tenantId: string, filter: AuditFilter): Omit<ListQuery, 'order'> {
  const params: unknown[] = [tenantId];
  const where = ['tenant_id = $1'];
  const add = (condition: (p: string) => string, value: unknown) => {
    if (value === undefined) return;
    params.push(value);
    where.push(condition(`$${params.length}`));
  };
  add((p) => `action = ${p}`, filter.action);
  add((p) => `resource_type = ${p}`, filter.resource_type);
  add((p) => `actor_id = ${p}`, filter.actor_id);
  add((p) => `member_id = ${p}`, filter.member_id);
  add((p) => `resource_id = ${p}`, filter.resource_id);
  add((p) => `created_at >= ${p}`, filter.from);
  add((p) => `created_at < ${p}`, filter.to);
  return { columns: COLUMNS, from: 'audit_log', where: where.join(' AND '), params };
}

/** One page of the tenant's matching entries, newest first. */
export async function listAuditLog(
  db: Queryable,
  tenantId: string,
  filter: AuditFilter,
  page: PageQuery,
): Promise<KeysetPage<AuditRow>> {
  return listPage<AuditRow>(db, { ...filtered(tenantId, filter), order: newestFirst() }, page);
}

/**
 * Every matching entry of the tenant, oldest first, in batches of at most `batchSize` rows: one
 * keyset query per batch, so memory holds one batch whatever the log's size, and no connection or
 * snapshot is held between batches (a slow reader holds nothing in the database). An entry
 * recorded while the batches are read is included when it sorts after the last batch read.
 */
export async function* auditLogBatches(
  db: Queryable,
  tenantId: string,
  filter: AuditFilter,
  batchSize: number,
): AsyncGenerator<AuditRow[], void, undefined> {
  const query = {
    ...filtered(tenantId, filter),
    order: { key: 'created_at', id: 'id', direction: 'oldest_first' as const },
  };
  let after: KeysetCursor | undefined;
  for (;;) {
    const page = await listPage<AuditRow>(db, query, { size: batchSize, after });
    if (page.rows.length) yield page.rows;
    if (!page.next) return;
    after = page.next;
  }
}
