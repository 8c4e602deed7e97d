import {
  listPage,
  newestFirst,
  preparedStatement,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';
import type { Role } from '../domain/access.js';

export interface ApiKeyRow {
  id: string;
  tenant_id: string;
  member_id: string;
  name: string;
  key_hint: string;
  created_at: Date;
  updated_at: Date;
  revoked_at: Date | null;
}

export async function insertApiKey(
  db: Queryable,
  k: { id: string; tenant_id: string; member_id: string; name: string; key_hash: string; key_hint: string },
): Promise<ApiKeyRow> {
  const { rows } = await db.query<ApiKeyRow>(
    `INSERT INTO api_keys (id, tenant_id, member_id, name, key_hash, key_hint) VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING id, tenant_id, member_id, name, key_hint, created_at, updated_at, revoked_at`,
    [k.id, k.tenant_id, k.member_id, k.name, k.key_hash, k.key_hint],
  );
  return rows[0]!;
}

export interface CredentialRow {
  key_id: string;
  tenant_id: string;
  member_id: string;
  role: Role;
}

/** The live credential of a key hash: the key is not revoked and its member is active. */
export async function findCredential(db: Queryable, keyHash: string): Promise<CredentialRow | undefined> {
  const { rows } = await db.query<CredentialRow>(FIND_CREDENTIAL([keyHash]));
  return rows[0];
}

/** Every token lookup; its plan (the join) cost 9 times its execution, so it is prepared once per connection. */
const FIND_CREDENTIAL = preparedStatement<[string]>(
  'api_keys_find_credential',
  `SELECT k.id AS key_id, k.tenant_id, k.member_id, m.role
     FROM api_keys k JOIN members m ON m.id = k.member_id AND m.tenant_id = k.tenant_id
    WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND m.is_active`,
);

/**
 * The member id of a live (unrevoked) key of the tenant, the key row share-locked until the
 * transaction ends: a concurrent revocation waits for the caller's mutation, or the mutation sees it.
 * Ids are compared as text, so a malformed id from metadata is no match rather than a cast error.
 */
export async function lockLiveKey(db: Queryable, tenantId: string, keyId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ member_id: string }>(
    `SELECT member_id FROM api_keys WHERE tenant_id = $1 AND id::text = $2 AND revoked_at IS NULL FOR SHARE`,
    [tenantId, keyId],
  );
  return rows[0]?.member_id;
}

export async function countActiveApiKeys(db: Queryable, tenantId: string, memberId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = $1 AND member_id = $2 AND revoked_at IS NULL',
    [tenantId, memberId],
  );
  return rows[0]!.n;
}

const KEY_COLUMNS = 'id, tenant_id, member_id, name, key_hint, created_at, updated_at, revoked_at';

export async function listApiKeys(
  db: Queryable,
  tenantId: string,
  memberId: string,
  page: PageQuery,
): Promise<KeysetPage<ApiKeyRow>> {
  return listPage<ApiKeyRow>(
    db,
    {
      columns: KEY_COLUMNS,
      from: 'api_keys',
      where: 'tenant_id = $1 AND member_id = $2',
      params: [tenantId, memberId],
      order: newestFirst(),
    },
    page,
  );
}

export async function findApiKey(db: Queryable, tenantId: string, id: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await db.query<ApiKeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE tenant_id = $1 AND id = $2`, [
    tenantId,
    id,
  ]);
  return rows[0];
}

/** Revokes once: a second revoke returns the row as it is. */
export async function revokeApiKey(db: Queryable, tenantId: string, id: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await db.query<ApiKeyRow>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()), updated_at = now()
      WHERE tenant_id = $1 AND id = $2 RETURNING ${KEY_COLUMNS}`,
    [tenantId, id],
  );
  return rows[0];
}
