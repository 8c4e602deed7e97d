import {
  listPage,
  newestFirst,
  updateTenantRow,
  type Columns,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';
import type { Role } from '../domain/access.js';

export interface MemberRow {
  id: string;
  tenant_id: string;
  name: string;
  email: string | null;
  role: Role;
  is_active: boolean;
  contact_id: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, tenant_id, name, email, role, is_active, contact_id, metadata, created_at, updated_at';

export async function insertMember(
  db: Queryable,
  m: {
    id: string;
    tenant_id: string;
    name: string;
    email: string | null;
    role: Role;
    metadata?: Record<string, unknown>;
  },
): Promise<MemberRow> {
  const { rows } = await db.query<MemberRow>(
    `INSERT INTO members (id, tenant_id, name, email, role, metadata) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
    [m.id, m.tenant_id, m.name, m.email, m.role, m.metadata ?? {}],
  );
  return rows[0]!;
}

export async function findMember(
  db: Queryable,
  tenantId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<MemberRow | undefined> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${COLUMNS} FROM members WHERE tenant_id = $1 AND id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`,
    [tenantId, id],
  );
  return rows[0];
}

/** One page, newest first. */
export async function listMembers(db: Queryable, tenantId: string, page: PageQuery): Promise<KeysetPage<MemberRow>> {
  return listPage<MemberRow>(
    db,
    { columns: COLUMNS, from: 'members', where: 'tenant_id = $1', params: [tenantId], order: newestFirst() },
    page,
  );
}

/**
 * Ids of the tenant's active owners, locked until the transaction ends, so two concurrent
 * demotions or deactivations cannot both pass the last-owner check.
 */
export async function lockActiveOwners(db: Queryable, tenantId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM members WHERE tenant_id = $1 AND role = 'owner' AND is_active ORDER BY id FOR UPDATE`,
    [tenantId],
  );
  return rows.map((r) => r.id);
}

export type MemberPatch = Partial<Pick<MemberRow, 'name' | 'email' | 'role' | 'contact_id' | 'metadata' | 'is_active'>>;
const PATCH: Columns<MemberPatch> = {
  name: true,
  email: true,
  role: true,
  contact_id: true,
  metadata: true,
  is_active: true,
};

export async function updateMember(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: MemberPatch,
): Promise<MemberRow> {
  return (await updateTenantRow<MemberRow>(db, 'members', COLUMNS, tenantId, id, patch, PATCH))!;
}
