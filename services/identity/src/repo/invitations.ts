import { listPage, newestFirst, type KeysetPage, type PageQuery, type Queryable } from '@workauto/db';
import type { Role } from '../domain/access.js';
import type { PolicyInput } from '../domain/policies.js';

export interface InvitationRow {
  id: string;
  tenant_id: string;
  email: string;
  name: string | null;
  role: Role;
  access_policies: PolicyInput[];
  expires_at: Date;
  claimed_at: Date | null;
  revoked_at: Date | null;
  member_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, tenant_id, email, name, role, access_policies, expires_at, claimed_at, revoked_at, member_id, created_at, updated_at';

export async function insertInvitation(
  db: Queryable,
  i: {
    id: string;
    tenant_id: string;
    email: string;
    name: string | null;
    role: Role;
    access_policies: PolicyInput[];
    code_hash: string;
    expires_at: Date;
  },
): Promise<InvitationRow> {
  const { rows } = await db.query<InvitationRow>(
    `INSERT INTO invitations (id, tenant_id, email, name, role, access_policies, code_hash, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${COLUMNS}`,
    [i.id, i.tenant_id, i.email, i.name, i.role, JSON.stringify(i.access_policies), i.code_hash, i.expires_at],
  );
  return rows[0]!;
}

export async function listInvitations(
  db: Queryable,
  tenantId: string,
  page: PageQuery,
): Promise<KeysetPage<InvitationRow>> {
  return listPage<InvitationRow>(
    db,
    { columns: COLUMNS, from: 'invitations', where: 'tenant_id = $1', params: [tenantId], order: newestFirst() },
    page,
  );
}

export async function findInvitation(
  db: Queryable,
  tenantId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<InvitationRow | undefined> {
  const { rows } = await db.query<InvitationRow>(
    `SELECT ${COLUMNS} FROM invitations WHERE tenant_id = $1 AND id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`,
    [tenantId, id],
  );
  return rows[0];
}

/**
 * The invitation of a code, locked for its claim. NOWAIT: a claim that meets another claim of the
 * code fails at once (55P03) rather than queueing behind it with a pool connection held.
 */
export async function lockInvitationByCode(db: Queryable, codeHash: string): Promise<InvitationRow | undefined> {
  const { rows } = await db.query<InvitationRow>(
    `SELECT ${COLUMNS} FROM invitations WHERE code_hash = $1 FOR UPDATE NOWAIT`,
    [codeHash],
  );
  return rows[0];
}

export async function markInvitation(
  db: Queryable,
  tenantId: string,
  id: string,
  change: { claimed_member_id: string } | { revoked: true },
): Promise<InvitationRow> {
  const { rows } = await db.query<InvitationRow>(
    'claimed_member_id' in change
      ? `UPDATE invitations SET claimed_at = now(), member_id = $3, updated_at = now() WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`
      : `UPDATE invitations SET revoked_at = now(), updated_at = now() WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    'claimed_member_id' in change ? [tenantId, id, change.claimed_member_id] : [tenantId, id],
  );
  return rows[0]!;
}
