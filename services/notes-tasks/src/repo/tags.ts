import { listPage, newestFirst, type KeysetPage, type PageQuery, type Queryable } from '@workauto/db';

export interface TagRow {
  id: string;
  tenant_id: string;
  name: string;
  color: string | null;
  description: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, tenant_id, name, color, description, metadata, created_at, updated_at';
const T_COLUMNS = COLUMNS.split(', ')
  .map((c) => `t.${c}`)
  .join(', ');

/**
 * The tenant's tag of this name key, created when there is none. Concurrent calls for one new
 * name create it once: the loser's insert waits on the unique index, then reads the winner's row.
 */
export async function upsertTag(
  db: Queryable,
  t: { id: string; tenant_id: string; name: string; name_key: string },
): Promise<{ tag: TagRow; created: boolean }> {
  const inserted = await db.query<TagRow>(
    `INSERT INTO tags (id, tenant_id, name, name_key) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant_id, name_key) DO NOTHING RETURNING ${COLUMNS}`,
    [t.id, t.tenant_id, t.name, t.name_key],
  );
  if (inserted.rows[0]) return { tag: inserted.rows[0], created: true };
  const { rows } = await db.query<TagRow>(`SELECT ${COLUMNS} FROM tags WHERE tenant_id = $1 AND name_key = $2`, [
    t.tenant_id,
    t.name_key,
  ]);
  return { tag: rows[0]!, created: false };
}

/**
 * Whether the note may have the tag of this name key: it has it already, or has fewer than max
 * tags. Takes the note's tag lock until commit, so parallel attaches cannot pass max together
 * (attaches to one note are a few ms each; they queue here, not on the note's row).
 */
export async function roomFor(
  db: Queryable,
  tenantId: string,
  noteId: string,
  nameKey: string,
  max: number,
): Promise<boolean> {
  await db.query(`SELECT pg_advisory_xact_lock(hashtextextended('nt.note_tags:' || $1, 0))`, [noteId]);
  const { rows } = await db.query<{ n: number; has: boolean }>(
    `SELECT count(*)::int AS n, coalesce(bool_or(t.name_key = $3), false) AS has
       FROM note_tags nt JOIN tags t ON t.id = nt.tag_id
      WHERE nt.tenant_id = $1 AND nt.note_id = $2 AND t.tenant_id = $1`,
    [tenantId, noteId, nameKey],
  );
  return rows[0]!.has || rows[0]!.n < max;
}

/** Attaches; false when the note had the tag already. */
export async function attach(db: Queryable, tenantId: string, noteId: string, tagId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO note_tags (tenant_id, note_id, tag_id) VALUES ($1, $2, $3) ON CONFLICT (note_id, tag_id) DO NOTHING`,
    [tenantId, noteId, tagId],
  );
  return rowCount === 1;
}

/** Detaches; the tag, or undefined when the note did not have it. */
export async function detach(
  db: Queryable,
  tenantId: string,
  noteId: string,
  tagId: string,
): Promise<TagRow | undefined> {
  const { rows } = await db.query<TagRow>(
    `WITH gone AS (DELETE FROM note_tags WHERE tenant_id = $1 AND note_id = $2 AND tag_id = $3 RETURNING tag_id)
     SELECT ${T_COLUMNS} FROM tags t JOIN gone g ON g.tag_id = t.id`,
    [tenantId, noteId, tagId],
  );
  return rows[0];
}

/** The note's tags by name (case-insensitive). */
export async function tagsOfNote(db: Queryable, tenantId: string, noteId: string): Promise<TagRow[]> {
  const { rows } = await db.query<TagRow>(
    `SELECT ${T_COLUMNS} FROM note_tags nt JOIN tags t ON t.id = nt.tag_id
      WHERE nt.tenant_id = $1 AND nt.note_id = $2 AND t.tenant_id = $1
      ORDER BY t.name_key, t.id`,
    [tenantId, noteId],
  );
  return rows;
}

/** One page, newest first. */
export async function listTags(db: Queryable, tenantId: string, page: PageQuery): Promise<KeysetPage<TagRow>> {
  return listPage<TagRow>(
    db,
    { columns: COLUMNS, from: 'tags', where: 'tenant_id = $1', params: [tenantId], order: newestFirst() },
    page,
  );
}
