import type { Queryable } from '@workauto/db';

export interface TenantRow {
  id: string;
  name: string;
  created_at: Date;
}

export async function insertTenant(db: Queryable, t: { id: string; name: string }): Promise<TenantRow> {
  const { rows } = await db.query<TenantRow>(
    'INSERT INTO tenants (id, name) VALUES ($1, $2) RETURNING id, name, created_at',
    [t.id, t.name],
  );
  return rows[0]!;
}
