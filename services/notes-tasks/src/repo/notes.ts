import { updateTenantRow } from '@workauto/db';
import type { KeysetCursor, Queryable } from '@workauto/db';

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

const COLUMNS = 'id, tenant_id, title, body, is_archived, is_pinned, metadata, notebook_id, source_url, word_count, created_at, updated_at, deleted_at';
const N_COLUMNS = COLUMNS.split(', ').map((c) => `n.${c}`).join(', ');

export type NewNote = Omit<NoteRow, 'created_at' | 'updated_at' | 'deleted_at'>;

export async function insertNote(db: Queryable, n: NewNote): Promise<NoteRow> {
  const { rows } = await db.query<NoteRow>(
    `INSERT INTO notes (id, tenant_id, title, body, is_archived, is_pinned, metadata, notebook_id, source_url, word_count)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${COLUMNS}`,
    [n.id, n.tenant_id, n.title, n.body, n.is_archived, n.is_pinned, n.metadata, n.notebook_id, n.source_url, n.word_count],
  );
  return rows[0]!;
}

/**
 * A live note of the tenant. `lock`: 'update' before changing it; 'share' while attaching tags
 * (so it cannot be deleted meanwhile, while attaches to the same note run side by side).
 */
export async function findNote(db: Queryable, tenantId: string, id: string, lock?: 'update' | 'share'): Promise<NoteRow | undefined> {
  const { rows } = await db.query<NoteRow>(
    `SELECT ${COLUMNS} FROM notes WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL${lock ? ` FOR ${lock.toUpperCase()}` : ''}`,
    [tenantId, id],
  );
  return rows[0];
}

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

/** Newest first; size+1 rows so the caller knows whether there is another page. */
export async function listNotes(db: Queryable, tenantId: string, f: NoteFilters, size: number, after?: KeysetCursor): Promise<NoteRow[]> {
  const { rows } = await db.query<NoteRow>(
    `SELECT ${N_COLUMNS} FROM notes n
      WHERE n.tenant_id = $1 AND n.deleted_at IS NULL
        AND ($2::timestamptz IS NULL OR (n.created_at, n.id) < ($2, $3::uuid))
        AND ($5::boolean IS NULL OR n.is_archived = $5)
        AND ($6::boolean IS NULL OR n.is_pinned = $6)
        AND ($7::uuid IS NULL OR n.notebook_id = $7)
        AND ($8::text IS NULL OR n.title ILIKE $8 OR n.body ILIKE $8)
        AND ($9::text IS NULL OR EXISTS (
              SELECT 1 FROM note_tags nt JOIN tags t ON t.id = nt.tag_id
               WHERE nt.note_id = n.id AND t.tenant_id = $1 AND t.name_key = $9))
        AND ($10::uuid IS NULL OR EXISTS (SELECT 1 FROM note_tags nt WHERE nt.note_id = n.id AND nt.tag_id = $10))
      ORDER BY n.created_at DESC, n.id DESC LIMIT $4`,
    [
      tenantId, after?.at ?? null, after?.id ?? null, size + 1,
      f.archived ?? null, f.pinned ?? null, f.notebookId ?? null, f.q ? likePattern(f.q) : null, f.tagKey ?? null, f.tagId ?? null,
    ],
  );
  return rows;
}

export async function updateNote(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: Partial<Pick<NoteRow, 'title' | 'body' | 'is_archived' | 'is_pinned' | 'metadata' | 'notebook_id' | 'source_url' | 'word_count' | 'deleted_at'>>,
): Promise<NoteRow> {
  return (await updateTenantRow<NoteRow>(db, 'notes', COLUMNS, tenantId, id, patch))!;
}

/** Live notes of the tenant that mention the entity, most recently updated first. */
export async function backlinks(db: Queryable, tenantId: string, entityType: string, entityId: string, limit: number): Promise<NoteRow[]> {
  const { rows } = await db.query<NoteRow>(
    `SELECT ${N_COLUMNS} FROM note_links l JOIN notes n ON n.id = l.note_id
      WHERE l.tenant_id = $1 AND l.entity_type = $2 AND l.entity_id = $3
        AND n.tenant_id = $1 AND n.deleted_at IS NULL
      ORDER BY n.updated_at DESC, n.id DESC LIMIT $4`,
    [tenantId, entityType, entityId, limit],
  );
  return rows;
}
