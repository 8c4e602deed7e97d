import {
  listPage,
  newestFirst,
  preparedStatement,
  updateTenantRow,
  type Columns,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  event_types: string[];
  channels: string[];
  metadata: Record<string, unknown>;
  is_enabled: boolean;
  disabled_at: Date | null;
  disabled_reason: string | null;
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, tenant_id, url, description, event_types, channels, metadata, is_enabled, disabled_at, disabled_reason, failing_since, created_at, updated_at';

export async function insertEndpoint(
  db: Queryable,
  row: Pick<EndpointRow, 'id' | 'tenant_id' | 'url' | 'description' | 'event_types' | 'channels' | 'metadata'>,
): Promise<EndpointRow> {
  const { rows } = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, tenant_id, url, description, event_types, channels, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
    [row.id, row.tenant_id, row.url, row.description, row.event_types, row.channels, row.metadata],
  );
  return rows[0]!;
}

/**
 * The tenant's live (not deleted) endpoints, enabled or not, counted under a per-tenant lock held
 * until the transaction ends: two creates at the cap take turns, and the second counts the first's.
 * The count is a statement of its own, after the lock: its snapshot then sees the previous holder's commit.
 */
export async function lockAndCountLive(tx: Queryable, tenantId: string): Promise<number> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))`, [tenantId]);
  const { rows } = await tx.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM webhook_endpoints WHERE tenant_id = $1 AND deleted_at IS NULL',
    [tenantId],
  );
  return rows[0]!.n;
}

/** A live (not deleted) endpoint of the tenant; `forUpdate` locks it until the transaction ends. */
export async function findEndpoint(
  db: Queryable,
  tenantId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<EndpointRow | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL${opts.forUpdate ? ' FOR UPDATE' : ''}`,
    [tenantId, id],
  );
  return rows[0];
}

export function listEndpoints(db: Queryable, tenantId: string, page: PageQuery): Promise<KeysetPage<EndpointRow>> {
  return listPage<EndpointRow>(
    db,
    {
      columns: COLUMNS,
      from: 'webhook_endpoints',
      where: 'tenant_id = $1 AND deleted_at IS NULL',
      params: [tenantId],
      order: newestFirst(),
    },
    page,
  );
}

/** The tenant's enabled endpoints with their filters (intake matches events against them). */
export async function enabledEndpoints(
  db: Queryable,
  tenantId: string,
): Promise<Pick<EndpointRow, 'id' | 'event_types' | 'channels'>[]> {
  const { rows } = await db.query<Pick<EndpointRow, 'id' | 'event_types' | 'channels'>>(
    'SELECT id, event_types, channels FROM webhook_endpoints WHERE tenant_id = $1 AND is_enabled AND deleted_at IS NULL',
    [tenantId],
  );
  return rows;
}

/**
 * Which of these tenants have an enabled endpoint (one query for a batch of events). Prepared: it
 * runs for every batch the intake consumes, and planning it cost PostgreSQL more than running it.
 */
const TENANTS_WITH_ENDPOINTS = preparedStatement<[string[]]>(
  'webhooks_tenants_with_endpoints',
  'SELECT DISTINCT tenant_id FROM webhook_endpoints WHERE tenant_id = ANY($1::uuid[]) AND is_enabled AND deleted_at IS NULL',
);

export async function tenantsWithEndpoints(db: Queryable, tenantIds: string[]): Promise<Set<string>> {
  const { rows } = await db.query<{ tenant_id: string }>(TENANTS_WITH_ENDPOINTS([tenantIds]));
  return new Set(rows.map((r) => r.tenant_id));
}

export interface EndpointPatch {
  url?: string | undefined;
  description?: string | null | undefined;
  event_types?: string[] | undefined;
  channels?: string[] | undefined;
  metadata?: Record<string, unknown> | undefined;
  is_enabled?: boolean | undefined;
  disabled_at?: Date | null | undefined;
  disabled_reason?: string | null | undefined;
  failing_since?: Date | null | undefined;
  deleted_at?: Date | undefined;
}
const PATCH: Columns<EndpointPatch> = {
  url: true,
  description: true,
  event_types: true,
  channels: true,
  metadata: true,
  is_enabled: true,
  disabled_at: true,
  disabled_reason: true,
  failing_since: true,
  deleted_at: true,
};

export async function updateEndpoint(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: EndpointPatch,
): Promise<EndpointRow> {
  return (await updateTenantRow<EndpointRow>(db, 'webhook_endpoints', COLUMNS, tenantId, id, patch, PATCH))!;
}
