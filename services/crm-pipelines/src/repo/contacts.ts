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

export interface ContactRow {
  id: string;
  tenant_id: string;
  name: string;
  company: string | null;
  job_title: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const COLUMNS = 'id, tenant_id, name, company, job_title, metadata, created_at, updated_at, deleted_at';

export async function insertContact(
  db: Queryable,
  c: Pick<ContactRow, 'id' | 'tenant_id' | 'name' | 'company' | 'job_title' | 'metadata'>,
): Promise<ContactRow> {
  const { rows } = await db.query<ContactRow>(
    INSERT_CONTACT([c.id, c.tenant_id, c.name, c.company, c.job_title, c.metadata]),
  );
  return rows[0]!;
}

/** Every contact create, prepared once per connection (it was planned on every call). */
const INSERT_CONTACT = preparedStatement(
  'contacts_insert',
  `INSERT INTO contacts (id, tenant_id, name, company, job_title, metadata) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
);

/**
 * A live contact of the tenant. `forUpdate` locks it: every change to its channels takes this
 * lock first, so the one-primary and dense-order rules see the channels one writer at a time.
 */
export async function findContact(
  db: Queryable,
  tenantId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<ContactRow | undefined> {
  const { rows } = await db.query<ContactRow>(
    (opts.forUpdate ? FIND_CONTACT_FOR_UPDATE : FIND_CONTACT)([tenantId, id]),
  );
  return rows[0];
}

/** The busiest reads (every GET and change of a contact and its channels), prepared once per connection. */
const FIND_CONTACT = preparedStatement<[string, string]>(
  'contacts_find',
  `SELECT ${COLUMNS} FROM contacts WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`,
);
const FIND_CONTACT_FOR_UPDATE = preparedStatement<[string, string]>(
  'contacts_find_for_update',
  `SELECT ${COLUMNS} FROM contacts WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE`,
);

/** `%`, `_` and `\` match themselves in the ILIKE pattern. */
function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Newest first; `q` matches a case-insensitive substring of the name, the company, or any live
 * channel's value or canonical value (trigram indexes serve the ILIKEs). Its condition is in the
 * statement only when q is given: each shape is prepared (listPage) and runs a generic plan, where
 * one text with `$2 IS NULL OR …` was planned on every call.
 */
export async function listContacts(
  db: Queryable,
  tenantId: string,
  q: string | undefined,
  page: PageQuery,
): Promise<KeysetPage<ContactRow>> {
  return listPage<ContactRow>(
    db,
    {
      columns: COLUMNS,
      from: 'contacts c',
      where: q
        ? `c.tenant_id = $1 AND c.deleted_at IS NULL
           AND (c.name ILIKE $2 OR c.company ILIKE $2
                OR EXISTS (SELECT 1 FROM contact_channels ch
                            WHERE ch.contact_id = c.id AND ch.tenant_id = $1 AND ch.deleted_at IS NULL
                              AND (ch.value ILIKE $2 OR ch.canonical_value ILIKE $2)))`
        : 'c.tenant_id = $1 AND c.deleted_at IS NULL',
      params: q ? [tenantId, likePattern(q)] : [tenantId],
      order: newestFirst('c'),
    },
    page,
  );
}

export type ContactPatch = Partial<Pick<ContactRow, 'name' | 'company' | 'job_title' | 'metadata' | 'deleted_at'>>;
const PATCH: Columns<ContactPatch> = { name: true, company: true, job_title: true, metadata: true, deleted_at: true };

export async function updateContact(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: ContactPatch,
): Promise<ContactRow> {
  return (await updateTenantRow<ContactRow>(db, 'contacts', COLUMNS, tenantId, id, patch, PATCH))!;
}
