import {
  checkColumns,
  listPage,
  newestFirst,
  preparedStatement,
  shapedStatement,
  updateTenantRow,
  type Columns,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';
import type { Priority } from '../domain/priority.js';

export interface TaskRow {
  id: string;
  tenant_id: string;
  parent_id: string | null;
  title: string;
  description: string | null;
  position: number;
  priority: Priority;
  assignee_id: string | null;
  creator_id: string | null;
  project_id: string | null;
  section_id: string | null;
  status_id: string | null;
  due_at: Date | null;
  /** YYYY-MM-DD */
  due_date: string | null;
  deadline: string | null;
  start_date: string | null;
  rrule: string | null;
  /** DTSTART of the rrule (internal, not in the API). */
  rrule_anchor: Date | null;
  next_occurrence: Date | null;
  estimation_minutes: number | null;
  time_spent_minutes: number | null;
  external_id: string | null;
  identifier: string | null;
  snoozed_until: Date | null;
  completed_at: Date | null;
  canceled_at: Date | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const COLUMNS = `id, tenant_id, parent_id, title, description, position, priority, assignee_id, creator_id, project_id,
  section_id, status_id, due_at, due_date::text AS due_date, deadline::text AS deadline, start_date::text AS start_date,
  rrule, rrule_anchor, next_occurrence, estimation_minutes, time_spent_minutes, external_id, identifier, snoozed_until,
  completed_at, canceled_at, metadata, created_at, updated_at, deleted_at`;

/** The sibling-set key of top-level tasks (the exclusion constraint uses the same). */
const ROOT = '00000000-0000-0000-0000-000000000000';

export type NewTask = Omit<TaskRow, 'created_at' | 'updated_at' | 'deleted_at' | 'completed_at' | 'canceled_at'>;
export type TaskPatch = Partial<Omit<TaskRow, 'id' | 'tenant_id' | 'created_at' | 'updated_at' | 'creator_id'>>;

/** The columns a create and a change both write. */
const FIELDS = {
  parent_id: true,
  title: true,
  description: true,
  position: true,
  priority: true,
  assignee_id: true,
  project_id: true,
  section_id: true,
  status_id: true,
  due_at: true,
  due_date: true,
  deadline: true,
  start_date: true,
  rrule: true,
  rrule_anchor: true,
  next_occurrence: true,
  estimation_minutes: true,
  time_spent_minutes: true,
  external_id: true,
  identifier: true,
  snoozed_until: true,
  metadata: true,
} as const;
const NEW: Columns<NewTask> = { ...FIELDS, id: true, tenant_id: true, creator_id: true };
const PATCH: Columns<TaskPatch> = { ...FIELDS, completed_at: true, canceled_at: true, deleted_at: true };

/**
 * Lock order of every change to the task tree (so concurrent ones never deadlock):
 *   1. the tenant's tree lock: shared for changes inside sibling sets (create, move among the same
 *      siblings, complete), exclusive for changes across them (reparent, delete with subtasks);
 *   2. the sibling-set locks of the parents involved, in sorted order;
 *   3. task rows, several at once always in id order.
 * Transaction-scoped advisory locks: released at COMMIT or ROLLBACK.
 */
export async function lockTree(db: Queryable, tenantId: string, mode: 'shared' | 'exclusive'): Promise<void> {
  await db.query(LOCK_TREE[mode]([tenantId]));
}

export async function lockSiblingSets(db: Queryable, tenantId: string, parents: (string | null)[]): Promise<void> {
  const keys = [...new Set(parents.map((p) => p ?? ROOT))].sort();
  for (const key of keys) await db.query(LOCK_SIBLINGS([tenantId, key]));
}

// Prepared: every change to the task tree takes the tree lock and a sibling-set lock, and
// PostgreSQL planned each call again (most of their time).
const LOCK_TREE = {
  shared: preparedStatement<[string]>(
    'tasks_lock_tree_shared',
    `SELECT pg_advisory_xact_lock_shared(hashtextextended('nt.tree:' || $1, 0))`,
  ),
  exclusive: preparedStatement<[string]>(
    'tasks_lock_tree',
    `SELECT pg_advisory_xact_lock(hashtextextended('nt.tree:' || $1, 0))`,
  ),
};
const LOCK_SIBLINGS = preparedStatement<[string, string]>(
  'tasks_lock_siblings',
  `SELECT pg_advisory_xact_lock(hashtextextended('nt.siblings:' || $1 || ':' || $2, 0))`,
);

/**
 * A create's locks (the tree's, shared, then its sibling set's) in one statement, in the lock
 * order above: the sibling-set lock is taken in the projection over the row of the tree lock's
 * subquery, which OFFSET 0 keeps a step of its own. One round trip fewer before the create's
 * position read, which waits for the sibling-set lock.
 */
export async function lockForCreate(db: Queryable, tenantId: string, parentId: string | null): Promise<void> {
  await db.query(LOCK_FOR_CREATE([tenantId, parentId ?? ROOT]));
}

const LOCK_FOR_CREATE = preparedStatement<[string, string]>(
  'tasks_lock_for_create',
  `SELECT pg_advisory_xact_lock(hashtextextended('nt.siblings:' || $1 || ':' || $2, 0))
     FROM (SELECT pg_advisory_xact_lock_shared(hashtextextended('nt.tree:' || $1, 0)) OFFSET 0) AS tree`,
);

/**
 * Inserts a task. A top-level task without a position goes last among the tenant's top-level
 * tasks: the insert reads that position itself, a round trip fewer under the sibling-set lock a
 * create holds (a subtask's comes from nextChildPosition, which also counts its siblings). Call
 * under that lock.
 */
export async function insertTask(
  db: Queryable,
  task: Omit<NewTask, 'position'> & { position?: number | undefined },
): Promise<TaskRow> {
  const { position, ...t } = task;
  checkColumns('tasks', t, NEW);
  const entries = Object.entries(position === undefined ? t : { ...t, position });
  const columns = entries.map(([k]) => k);
  const values = entries.map(([, v]) => v);
  const placeholders = values.map((_, i) => `$${i + 1}`);
  if (position === undefined) {
    if (t.parent_id !== null) throw new Error('insertTask: a subtask needs its position (nextChildPosition)');
    columns.push('position');
    placeholders.push(`coalesce((${lastTopPosition(`$${columns.indexOf('tenant_id') + 1}`)}), 0) + 1`);
  }
  const { rows } = await db.query<TaskRow>(
    shapedStatement(
      `INSERT INTO tasks (${columns.join(', ')}) VALUES (${placeholders.join(', ')}) RETURNING ${COLUMNS}`,
      values,
    ),
  );
  return rows[0]!;
}

/** A live task of the tenant; `lock` takes its row lock until the transaction ends. */
export async function findTask(
  db: Queryable,
  tenantId: string,
  id: string,
  lock?: 'update',
): Promise<TaskRow | undefined> {
  const { rows } = await db.query<TaskRow>((lock ? FIND_TASK_FOR_UPDATE : FIND_TASK)([tenantId, id]));
  return rows[0];
}

/** The busiest reads (every GET and change of a task), prepared once per connection. */
const FIND_TASK = preparedStatement<[string, string]>(
  'tasks_find',
  `SELECT ${COLUMNS} FROM tasks WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`,
);
const FIND_TASK_FOR_UPDATE = preparedStatement<[string, string]>(
  'tasks_find_for_update',
  `SELECT ${COLUMNS} FROM tasks WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE`,
);

/** Locks live tasks in id order and returns them (by id). */
export async function lockTasks(db: Queryable, tenantId: string, ids: string[]): Promise<Map<string, TaskRow>> {
  const { rows } = await db.query<TaskRow>(
    `SELECT ${COLUMNS} FROM tasks WHERE tenant_id = $1 AND id = ANY($2::uuid[]) AND deleted_at IS NULL ORDER BY id FOR UPDATE`,
    [tenantId, ids],
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Ids of the live children of `parentId` (null: the top-level tasks) in position order. With
 * `lock` their rows are locked (in id order) first. Call under the sibling-set lock.
 */
export async function siblingIds(
  db: Queryable,
  tenantId: string,
  parentId: string | null,
  lock = false,
): Promise<string[]> {
  // A parent's children are read from the parent's row, whose unique key finds it whatever the
  // statistics say, through tasks_children. Asked directly by tenant and parent, the planner chose
  // by the tenant's estimated size: before autovacuum's analyze after a tenant's import it took the
  // tenant to have one task and read all of them through the unique (tenant_id, id) index (1,949
  // buffers for two subtasks beside 2,000 tasks). The top level has no parent row; its read is the
  // size of the top level anyway. (A coalesce() of both cases matched no index at all.)
  // Locked rows are taken in id order (as every multi-row lock here), looked up by the ids read.
  const children =
    parentId === null
      ? `SELECT id, position FROM tasks WHERE tenant_id = $1 AND parent_id IS NULL AND deleted_at IS NULL
          ORDER BY tenant_id, parent_id, position`
      : `SELECT c.id, c.position FROM tasks p
           JOIN tasks c ON c.tenant_id = p.tenant_id AND c.parent_id = p.id AND c.deleted_at IS NULL
          WHERE p.tenant_id = $1 AND p.id = $2
          ORDER BY c.position`;
  const { rows } = await db.query<{ id: string; position: number }>(
    lock
      ? `SELECT id, position FROM tasks
          WHERE tenant_id = $1 AND id = ANY(ARRAY(SELECT id FROM (${children}) AS children))
            AND ${parentId === null ? 'parent_id IS NULL' : 'parent_id = $2'} AND deleted_at IS NULL
          ORDER BY id FOR UPDATE`
      : children,
    parentId === null ? [tenantId] : [tenantId, parentId],
  );
  return rows.sort((a, b) => a.position - b.position || (a.id < b.id ? -1 : 1)).map((r) => r.id);
}

/**
 * The last position among the top-level tasks of the tenant in parameter `tenant`. Ordered as the
 * index is, not max(): PostgreSQL does not take `parent_id IS NULL` as fixing parent_id, so neither
 * max(position) nor ORDER BY position alone read tasks_children backwards; they scanned every
 * top-level task of the tenant (≈ 400 µs at 2,000 of them, under the lock).
 */
const lastTopPosition = (tenant: string) =>
  `SELECT position FROM tasks WHERE tenant_id = ${tenant} AND parent_id IS NULL AND deleted_at IS NULL
    ORDER BY tenant_id DESC, parent_id DESC, position DESC LIMIT 1`;

/**
 * Where a new last subtask of `parentId` goes: one past the last position, and how many live
 * children it has (the subtask limit), read from the children index (tasks_children) instead of
 * every sibling row, so that the sibling-set lock a create holds stays short however many
 * siblings there are. Call under that lock. (A top-level task's position is read by its insert.)
 */
export async function nextChildPosition(
  db: Queryable,
  tenantId: string,
  parentId: string,
): Promise<{ position: number; live: number }> {
  const { rows } = await db.query<{ last: number | null; live: number }>(NEXT_CHILD_POSITION([tenantId, parentId]));
  return { position: (rows[0]?.last ?? 0) + 1, live: rows[0]?.live ?? 0 };
}

const NEXT_CHILD_POSITION = preparedStatement<[string, string]>(
  'tasks_next_child_position',
  'SELECT max(position) AS last, count(*)::int AS live FROM tasks WHERE tenant_id = $1 AND parent_id = $2 AND deleted_at IS NULL',
);

/** Sets position 1..n in the order of `ids` (only rows whose position changes are written). */
export async function setPositions(db: Queryable, tenantId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query(
    `UPDATE tasks t SET position = o.pos, updated_at = now()
       FROM unnest($2::uuid[]) WITH ORDINALITY AS o(id, pos)
      WHERE t.tenant_id = $1 AND t.id = o.id AND t.position <> o.pos`,
    [tenantId, ids],
  );
}

/** The live subtasks of a task at any depth (not the task itself). */
export async function descendantIds(db: Queryable, tenantId: string, id: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `WITH RECURSIVE down AS (
       SELECT id FROM tasks WHERE tenant_id = $1 AND parent_id = $2 AND deleted_at IS NULL
       UNION
       SELECT t.id FROM tasks t JOIN down d ON t.parent_id = d.id WHERE t.tenant_id = $1 AND t.deleted_at IS NULL
     ) SELECT id FROM down`,
    [tenantId, id],
  );
  return rows.map((r) => r.id);
}

/** True when `ancestorId` is `id` itself or one of its ancestors. */
export async function isSelfOrAncestor(
  db: Queryable,
  tenantId: string,
  ancestorId: string,
  id: string,
): Promise<boolean> {
  const { rows } = await db.query(
    `WITH RECURSIVE up AS (
       SELECT id, parent_id FROM tasks WHERE tenant_id = $1 AND id = $2
       UNION
       SELECT t.id, t.parent_id FROM tasks t JOIN up u ON t.id = u.parent_id WHERE t.tenant_id = $1
     ) SELECT 1 FROM up WHERE id = $3 LIMIT 1`,
    [tenantId, id, ancestorId],
  );
  return rows.length > 0;
}

export interface TaskFilters {
  parentId?: string | undefined;
  topLevel?: boolean | undefined;
  assigneeId?: string | undefined;
  statusId?: string | undefined;
  projectId?: string | undefined;
  completed?: boolean | undefined;
  dueBefore?: Date | undefined;
  dueAfter?: Date | undefined;
  includeSnoozed?: boolean | undefined;
}

/** One page, newest first. A task's due for the window: due_at, else due_date at 00:00 UTC. */
export async function listTasks(
  db: Queryable,
  tenantId: string,
  f: TaskFilters,
  page: PageQuery,
): Promise<KeysetPage<TaskRow>> {
  return listPage<TaskRow>(
    db,
    {
      columns: COLUMNS,
      from: 'tasks',
      where: `tenant_id = $1 AND deleted_at IS NULL
        AND ($2::uuid IS NULL OR parent_id = $2)
        AND ($3::boolean IS NOT TRUE OR parent_id IS NULL)
        AND ($4::uuid IS NULL OR assignee_id = $4)
        AND ($5::uuid IS NULL OR status_id = $5)
        AND ($6::uuid IS NULL OR project_id = $6)
        AND ($7::boolean IS NULL OR (completed_at IS NOT NULL) = $7)
        AND ($8::timestamptz IS NULL OR coalesce(due_at, due_date::timestamp AT TIME ZONE 'UTC') < $8)
        AND ($9::timestamptz IS NULL OR coalesce(due_at, due_date::timestamp AT TIME ZONE 'UTC') >= $9)
        AND ($10::boolean IS TRUE OR snoozed_until IS NULL OR snoozed_until <= now())`,
      params: [
        tenantId,
        f.parentId ?? null,
        f.topLevel ?? null,
        f.assigneeId ?? null,
        f.statusId ?? null,
        f.projectId ?? null,
        f.completed ?? null,
        f.dueBefore ?? null,
        f.dueAfter ?? null,
        f.includeSnoozed ?? null,
      ],
      order: newestFirst(),
    },
    page,
  );
}

/** Live children of a task in position order. */
export async function children(db: Queryable, tenantId: string, parentId: string): Promise<TaskRow[]> {
  const { rows } = await db.query<TaskRow>(
    `SELECT ${COLUMNS} FROM tasks WHERE tenant_id = $1 AND parent_id = $2 AND deleted_at IS NULL ORDER BY position, id`,
    [tenantId, parentId],
  );
  return rows;
}

export async function updateTask(db: Queryable, tenantId: string, id: string, patch: TaskPatch): Promise<TaskRow> {
  return (await updateTenantRow<TaskRow>(db, 'tasks', COLUMNS, tenantId, id, patch, PATCH))!;
}

/** Changes a live task, read by nothing before (its row lock is the update's); undefined when there is none. */
export async function updateLiveTask(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: TaskPatch,
): Promise<TaskRow | undefined> {
  return updateTenantRow<TaskRow>(db, 'tasks', COLUMNS, tenantId, id, patch, PATCH, { live: true });
}

/** Sets completed_at on those of the tasks that are open; returns them. */
export async function completeOpen(db: Queryable, tenantId: string, ids: string[]): Promise<TaskRow[]> {
  const { rows } = await db.query<TaskRow>(
    `UPDATE tasks SET completed_at = now(), updated_at = now()
      WHERE tenant_id = $1 AND id = ANY($2::uuid[]) AND deleted_at IS NULL AND completed_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, ids],
  );
  return rows;
}

export async function softDelete(db: Queryable, tenantId: string, ids: string[]): Promise<TaskRow[]> {
  const { rows } = await db.query<TaskRow>(
    `UPDATE tasks SET deleted_at = now(), updated_at = now()
      WHERE tenant_id = $1 AND id = ANY($2::uuid[]) AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, ids],
  );
  return rows;
}
