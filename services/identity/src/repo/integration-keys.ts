import { listPage, newestFirst, type KeysetPage, type PageQuery, type Queryable } from '@workauto/db';

export interface IntegrationKeyRow {
  id: string;
  tenant_id: string;
  provider: string;
  key_id: string;
  key_version: number;
  key_hint: string | null;
  label: string | null;
  status: string;
  metadata: Record<string, unknown>;
  last_verified_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

// The ciphertext is never selected with the summary: only decryption paths read it.
const COLUMNS =
  'id, tenant_id, provider, key_id, key_version, key_hint, label, status, metadata, last_verified_at, created_at, updated_at';

/** Inserts or replaces the tenant's credential for a provider; a replacement bumps key_version. */
export async function upsertIntegrationKey(
  db: Queryable,
  k: {
    id: string;
    tenant_id: string;
    provider: string;
    ciphertext: string;
    key_id: string;
    key_hint: string;
    label: string | null;
    metadata: Record<string, unknown>;
    verified: boolean;
  },
): Promise<IntegrationKeyRow> {
  const { rows } = await db.query<IntegrationKeyRow>(
    `INSERT INTO integration_keys (id, tenant_id, provider, ciphertext, key_id, key_hint, label, metadata, last_verified_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $9 THEN now() END)
     ON CONFLICT (tenant_id, provider) DO UPDATE SET
       ciphertext = EXCLUDED.ciphertext, key_id = EXCLUDED.key_id, key_hint = EXCLUDED.key_hint,
       label = coalesce(EXCLUDED.label, integration_keys.label), metadata = EXCLUDED.metadata,
       status = 'active', key_version = integration_keys.key_version + 1,
       last_verified_at = EXCLUDED.last_verified_at, updated_at = now()
     RETURNING ${COLUMNS}`,
    [k.id, k.tenant_id, k.provider, k.ciphertext, k.key_id, k.key_hint, k.label, k.metadata, k.verified],
  );
  return rows[0]!;
}

export async function findIntegrationKey(
  db: Queryable,
  tenantId: string,
  provider: string,
): Promise<IntegrationKeyRow | undefined> {
  const { rows } = await db.query<IntegrationKeyRow>(
    `SELECT ${COLUMNS} FROM integration_keys WHERE tenant_id = $1 AND provider = $2`,
    [tenantId, provider],
  );
  return rows[0];
}

export async function listIntegrationKeys(
  db: Queryable,
  tenantId: string,
  page: PageQuery,
): Promise<KeysetPage<IntegrationKeyRow>> {
  return listPage<IntegrationKeyRow>(
    db,
    { columns: COLUMNS, from: 'integration_keys', where: 'tenant_id = $1', params: [tenantId], order: newestFirst() },
    page,
  );
}

export async function deleteIntegrationKey(
  db: Queryable,
  tenantId: string,
  provider: string,
): Promise<IntegrationKeyRow | undefined> {
  const { rows } = await db.query<IntegrationKeyRow>(
    `DELETE FROM integration_keys WHERE tenant_id = $1 AND provider = $2 RETURNING ${COLUMNS}`,
    [tenantId, provider],
  );
  return rows[0];
}
