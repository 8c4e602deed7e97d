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

export interface NoteRow {
  id: string;
  tenant_id: string;
  title: string;
  body: string;
  is_archived: boolean;
  is_pinned: boolean;
  metadata: Record<string, unknown>;
  notebook_id: string | null;
  source_url: string | null;
  word_count: number;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const COLUMNS =
  'id, tenant_id, title, body, is_archived, is_pinned, metadata, notebook_id, source_url, word_count, created_at, updated_at, deleted_at';
const N_COLUMNS = COLUMNS.split(', ')
  .map((c) => `n.${c}`)
  .join(', ');

export type NewNote = Omit<NoteRow, 'created_at' | 'updated_at' | 'deleted_at'>;

export async function insertNote(db: Queryable, n: NewNote): Promise<NoteRow> {
  const { rows } = await db.query<NoteRow>(
    INSERT_NOTE([
      n.id,
      n.tenant_id,
      n.title,
      n.body,
      n.is_archived,
      n.is_pinned,
      n.metadata,
      n.notebook_id,
      n.source_url,
      n.word_count,
    ]),
  );
  return rows[0]!;
}

/** Every note created (8 % of the API mix): its planning was nearly half its time, so it is prepared. */
const INSERT_NOTE = preparedStatement(
  'notes_insert',
  `INSERT INTO notes (id, tenant_id, title, body, is_archived, is_pinned, metadata, notebook_id, source_url, word_count)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${COLUMNS}`,
);

/**
 * A live note of the tenant. `lock`: 'update' before changing it; 'share' while attaching tags
 * (so it cannot be deleted meanwhile, while attaches to the same note run side by side).
 */
export async function findNote(
  db: Queryable,
  tenantId: string,
  id: string,
  lock?: 'update' | 'share',
): Promise<NoteRow | undefined> {
  const { rows } = await db.query<NoteRow>(FIND_NOTE[lock ?? 'none']([tenantId, id]));
  return rows[0];
}

/** The busiest read (every GET and change of a note), prepared once per connection. */
const FIND_NOTE = {
  none: preparedStatement<[string, string]>(
    'notes_find',
    `SELECT ${COLUMNS} FROM notes WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`,
  ),
  update: preparedStatement<[string, string]>(
    'notes_find_for_update',
    `SELECT ${COLUMNS} FROM notes WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE`,
  ),
  share: preparedStatement<[string, string]>(
    'notes_find_for_share',
    `SELECT ${COLUMNS} FROM notes WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL FOR SHARE`,
  ),
};

export interface NoteFilters {
  tagKey?: string | undefined;
  tagId?: string | undefined;
  archived?: boolean | undefined;
  pinned?: boolean | undefined;
  notebookId?: string | undefined;
  q?: string | undefined;
}

/** `%`, `_` and `\` match themselves in the ILIKE pattern. */
function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * One page, newest first. The conditions are only those of the filters given: each combination is
 * its own statement shape, prepared once per connection (shapedStatement), whose generic plan needs
 * no planning; one text with `$n IS NULL OR …` for every filter was planned on every call.
 */
export async function listNotes(
  db: Queryable,
  tenantId: string,
  f: NoteFilters,
  page: PageQuery,
): Promise<KeysetPage<NoteRow>> {
  const params: unknown[] = [tenantId];
  const param = (value: unknown) => `$${params.push(value)}`;
  const where = ['n.tenant_id = $1', 'n.deleted_at IS NULL'];
  if (f.archived !== undefined) where.push(`n.is_archived = ${param(f.archived)}`);
  if (f.pinned !== undefined) where.push(`n.is_pinned = ${param(f.pinned)}`);
  if (f.notebookId !== undefined) where.push(`n.notebook_id = ${param(f.notebookId)}::uuid`);
  if (f.q) {
    const pattern = param(likePattern(f.q));
    where.push(`(n.title ILIKE ${pattern} OR n.body ILIKE ${pattern})`);
  }
  if (f.tagKey !== undefined)
    where.push(`EXISTS (SELECT 1 FROM note_tags nt JOIN tags t ON t.id = nt.tag_id
               WHERE nt.note_id = n.id AND t.tenant_id = $1 AND t.name_key = ${param(f.tagKey)})`);
  if (f.tagId !== undefined)
    where.push(`EXISTS (SELECT 1 FROM note_tags nt WHERE nt.note_id = n.id AND nt.tag_id = ${param(f.tagId)}::uuid)`);
  return listPage<NoteRow>(
    db,
    { columns: N_COLUMNS, from: 'notes n', where: where.join(' AND '), params, order: newestFirst('n') },
    page,
  );
}

export type NotePatch = Partial<
  Pick<
    NoteRow,
    | 'title'
    | 'body'
    | 'is_archived'
    | 'is_pinned'
    | 'metadata'
    | 'notebook_id'
    | 'source_url'
    | 'word_count'
    | 'deleted_at'
  >
>;
const PATCH: Columns<NotePatch> = {
  title: true,
  body: true,
  is_archived: true,
  is_pinned: true,
  metadata: true,
  notebook_id: true,
  source_url: true,
  word_count: true,
  deleted_at: true,
};

export async function updateNote(db: Queryable, tenantId: string, id: string, patch: NotePatch): Promise<NoteRow> {
  return (await updateTenantRow<NoteRow>(db, 'notes', COLUMNS, tenantId, id, patch, PATCH))!;
}

/**
 * Live notes of the tenant that mention the entity, most recently updated first: at most `limit`,
 * and no more than `maxBytes` of their text (always the first one), counted in SQL so the notes
 * past it never leave the database (1,000 notes of 100,000 characters would be 300 MB in one answer).
 */
export async function backlinks(
  db: Queryable,
  tenantId: string,
  entityType: string,
  entityId: string,
  limit: number,
  maxBytes: number,
): Promise<NoteRow[]> {
  const { rows } = await db.query<NoteRow>(
    `SELECT ${COLUMNS} FROM (
       SELECT ${N_COLUMNS},
              row_number() OVER w AS n,
              sum(octet_length(n.body) + octet_length(n.title) + octet_length(n.metadata::text)
                  + coalesce(octet_length(n.source_url), 0) + 512) OVER w AS running_bytes
         FROM note_links l JOIN notes n ON n.id = l.note_id
        WHERE l.tenant_id = $1 AND l.entity_type = $2 AND l.entity_id = $3 AND n.tenant_id = $1 AND n.deleted_at IS NULL
       WINDOW w AS (ORDER BY n.updated_at DESC, n.id DESC)
        ORDER BY n.updated_at DESC, n.id DESC LIMIT $4) linked
      WHERE n = 1 OR running_bytes <= $5
      ORDER BY updated_at DESC, id DESC`,
    [tenantId, entityType, entityId, limit, maxBytes],
  );
  return rows;
}
