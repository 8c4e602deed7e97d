import {
  listPage,
  newestFirst,
  preparedStatement,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';

export interface AuditRow {
  id: string;
  tenant_id: string;
  action: string;
  actor_id: string;
  actor_type: string;
  resource_type: string | null;
  resource_id: string | null;
  ip_address: string | null;
  user_agent: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

/** Idempotent on the event id: a redelivered event is not recorded twice. */
export async function insertAuditEntry(db: Queryable, e: AuditRow): Promise<void> {
  await db.query(
    INSERT_AUDIT_ENTRY([
      e.id,
      e.tenant_id,
      e.action,
      e.actor_id,
      e.actor_type,
      e.resource_type,
      e.resource_id,
      e.ip_address,
      e.user_agent,
      e.metadata,
      e.created_at,
    ]),
  );
}

/** One per change of every service (the audit tail's last step), prepared once per connection. */
const INSERT_AUDIT_ENTRY = preparedStatement(
  'audit_log_insert',
  `INSERT INTO audit_log (id, tenant_id, action, actor_id, actor_type, resource_type, resource_id, ip_address, user_agent, metadata, created_at)
   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`,
);

export async function listAuditLog(
  db: Queryable,
  tenantId: string,
  filter: { action?: string | undefined; resource_type?: string | undefined },
  page: PageQuery,
): Promise<KeysetPage<AuditRow>> {
  return listPage<AuditRow>(
    db,
    {
      columns:
        'id, tenant_id, action, actor_id, actor_type, resource_type, resource_id, ip_address, user_agent, metadata, created_at',
      from: 'audit_log',
      where: 'tenant_id = $1 AND ($2::text IS NULL OR action = $2) AND ($3::text IS NULL OR resource_type = $3)',
      params: [tenantId, filter.action ?? null, filter.resource_type ?? null],
      order: newestFirst(),
    },
    page,
  );
}
