import { preparedStatement, type Queryable } from '@workauto/db';

export interface AccessPolicyRow {
  tenant_id: string;
  member_id: string;
  domain: string;
  access_level: string;
  resource_filter: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

/** Read by every token lookup (a principal carries its policies), prepared once per connection. */
const LIST_POLICIES = preparedStatement<[string, string]>(
  'access_policies_of_member',
  `SELECT tenant_id, member_id, domain, access_level, resource_filter, created_at, updated_at
     FROM access_policies WHERE tenant_id = $1 AND member_id = $2 ORDER BY domain`,
);

export async function listPolicies(db: Queryable, tenantId: string, memberId: string): Promise<AccessPolicyRow[]> {
  const { rows } = await db.query<AccessPolicyRow>(LIST_POLICIES([tenantId, memberId]));
  return rows;
}

/** Replaces the member's whole set in the caller's transaction (resource_filter stays its empty default). */
export async function replacePolicies(
  db: Queryable,
  tenantId: string,
  memberId: string,
  policies: { domain: string; access_level: string }[],
): Promise<AccessPolicyRow[]> {
  await db.query('DELETE FROM access_policies WHERE tenant_id = $1 AND member_id = $2', [tenantId, memberId]);
  for (const p of policies) {
    await db.query(`INSERT INTO access_policies (tenant_id, member_id, domain, access_level) VALUES ($1, $2, $3, $4)`, [
      tenantId,
      memberId,
      p.domain,
      p.access_level,
    ]);
  }
  return listPolicies(db, tenantId, memberId);
}
