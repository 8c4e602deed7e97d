import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { PoolClient } from '@workauto/db';
import {
  TaskPriority,
  type CreateTaskRequest,
  type Task,
} from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { insertTask, lockForCreate, siblingIds, updateTask, type NewTask } from './repo/tasks.js';
import { S, badFields, failure, startNotesTasks, tenant, type NotesTasks } from './test-support.js';

type T = ReturnType<typeof tenant>;

describe('tasks over gRPC', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  const create = (t: T, body: Partial<CreateTaskRequest> = {}) =>
    nt.client.call(S.createTask, { title: 'Task', ...body }, t.call);
  const subtasks = async (t: T, id: string) => (await nt.client.call(S.listSubtasks, { id }, t.call)).data;
  const order = async (t: T, id: string) => (await subtasks(t, id)).map((x) => [x.title, x.position]);
  /** Positions of the live siblings under a parent, straight from the table. */
  const positions = async (t: T, parentId: string | null) =>
    (
      await nt.db.query(
        `SELECT position FROM tasks WHERE tenant_id = $1 AND parent_id IS NOT DISTINCT FROM $2 AND deleted_at IS NULL ORDER BY position`,
        [t.id, parentId],
      )
    ).rows.map((r) => r.position);

  /**
   * A client that runs each statement under EXPLAIN (ANALYZE, BUFFERS) before running it: the
   * buffers the first one touched measure a read's work independently of the machine's speed. On
   * `client`, in a transaction, each EXPLAIN runs in a savepoint rolled back after it, so that a
   * write under it runs once.
   */
  const explaining = (client?: PoolClient) => {
    const db = client ?? nt.db;
    let first: Record<string, unknown> | undefined;
    const run = async (text: string, values: unknown[]) => {
      if (client) await client.query('SAVEPOINT explained');
      const { rows } = await db.query<{ 'QUERY PLAN': { Plan: Record<string, unknown> }[] }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`,
        values,
      );
      if (client) await client.query('ROLLBACK TO SAVEPOINT explained');
      first ??= rows[0]!['QUERY PLAN'][0]!.Plan;
      return db.query(text, values);
    };
    const blocksOf = (node: Record<string, unknown> | undefined) =>
      Number(node?.['Shared Hit Blocks']) + Number(node?.['Shared Read Blocks']);
    /** The plan's first subquery run once (an InitPlan: a write's read of what it writes). */
    const initPlan = (node: Record<string, unknown>): Record<string, unknown> | undefined =>
      String(node['Subplan Name'] ?? '').startsWith('InitPlan')
        ? node
        : ((node.Plans as Record<string, unknown>[] | undefined) ?? []).map(initPlan).find(Boolean);
    return {
      db: {
        query: (q: string | { text: string; values: unknown[] }, values: unknown[] = []) =>
          typeof q === 'string' ? run(q, values) : run(q.text, q.values),
      } as never,
      blocks: () => blocksOf(first),
      initPlanBlocks: () => blocksOf(first && initPlan(first)),
      plan: () => JSON.stringify(first).slice(0, 400),
    };
  };

  /** A task row as the repo inserts it, every optional field empty. */
  const taskRow = (t: T, fields: Partial<NewTask> = {}): NewTask => ({
    id: randomUUID(),
    tenant_id: t.id,
    parent_id: null,
    title: 'new',
    description: null,
    position: 1,
    priority: 'none',
    assignee_id: null,
    creator_id: null,
    project_id: null,
    section_id: null,
    status_id: null,
    due_at: null,
    due_date: null,
    deadline: null,
    start_date: null,
    rrule: null,
    rrule_anchor: null,
    next_occurrence: null,
    estimation_minutes: null,
    time_spent_minutes: null,
    external_id: null,
    identifier: null,
    snoozed_until: null,
    metadata: {},
    ...fields,
  });

  it('creates a task with every field and reads it back', async () => {
    const t = tenant();
    const fields = {
      title: '  Ship it ',
      description: 'All of it',
      assignee_id: randomUUID(),
      project_id: randomUUID(),
      section_id: randomUUID(),
      status_id: randomUUID(),
      priority: TaskPriority.TASK_PRIORITY_HIGH,
      due_at: new Date('2026-03-02T10:00:00.000Z'),
      deadline: '2026-03-05',
      start_date: '2026-02-25',
      estimation_minutes: 90,
      time_spent_minutes: 0,
      external_id: 'JIRA-1',
      identifier: 'T-1',
      metadata: { source: 'test' },
    };
    const task = await create(t, fields);
    assert.deepEqual(
      [
        task.title,
        task.description,
        task.assignee_id,
        task.project_id,
        task.section_id,
        task.status_id,
        task.priority,
        task.due_at,
        task.deadline,
        task.start_date,
      ],
      [
        'Ship it',
        'All of it',
        fields.assignee_id,
        fields.project_id,
        fields.section_id,
        fields.status_id,
        TaskPriority.TASK_PRIORITY_HIGH,
        fields.due_at,
        '2026-03-05',
        '2026-02-25',
      ],
    );
    assert.deepEqual(
      [
        task.estimation_minutes,
        task.time_spent_minutes,
        task.external_id,
        task.identifier,
        task.metadata,
        task.position,
        task.priority_key,
        task.creator_id,
        task.tenant_id,
      ],
      [90, 0, 'JIRA-1', 'T-1', { source: 'test' }, 1, '1-0000000001', t.memberId, t.id],
    );
    assert.deepEqual(
      [
        task.parent_id,
        task.completed_at,
        task.deleted_at,
        task.rrule,
        task.next_occurrence,
        task.due_date,
        task.canceled_at,
      ],
      [undefined, undefined, undefined, undefined, undefined, undefined, undefined],
    );
    assert.deepEqual(await nt.client.call(S.getTask, { id: task.id }, t.call), task);
    const plain = await create(t, { assignee_id: '', parent_id: '', project_id: '' });
    assert.deepEqual(
      [plain.priority, plain.priority_key, plain.position, plain.metadata],
      [TaskPriority.TASK_PRIORITY_NONE, '4-0000000002', 2, {}],
    );
    assert.deepEqual(
      [plain.assignee_id, plain.parent_id, plain.project_id],
      [undefined, undefined, undefined],
      'empty ids are unset',
    );
    assert.deepEqual(await nt.events(t.id), ['task.created', 'task.created']);
  });

  it('patches fields and clears them with empty strings or null (update_mask)', async () => {
    const t = tenant();
    const task = await create(t, {
      assignee_id: randomUUID(),
      due_at: new Date('2026-05-01T00:00:00Z'),
      estimation_minutes: 5,
      description: 'd',
    });
    const p = await nt.client.call(
      S.updateTask,
      {
        id: task.id,
        title: 'Renamed',
        priority: TaskPriority.TASK_PRIORITY_URGENT,
        assignee_id: '',
        description: '',
        update_mask: ['due_at', 'estimation_minutes'],
      },
      t.call,
    );
    assert.deepEqual(
      [p.title, p.priority, p.priority_key, p.assignee_id, p.description, p.due_at, p.estimation_minutes],
      ['Renamed', TaskPriority.TASK_PRIORITY_URGENT, '0-0000000001', undefined, undefined, undefined, undefined],
    );
    assert.deepEqual(
      await badFields(
        nt.client.call(
          S.updateTask,
          { id: task.id, due_date: '2026-01-01', update_mask: ['due_date', 'title'] },
          t.call,
        ),
      ),
      ['title'],
    );
    assert.deepEqual(await nt.client.call(S.updateTask, { id: task.id }, t.call), p, 'an empty patch changes nothing');
    assert.deepEqual(await nt.events(t.id), ['task.created', 'task.updated']);
    // Times outside the years 1900-2999 are refused, naming the field.
    assert.deepEqual(
      await badFields(
        nt.client.call(
          S.updateTask,
          { id: task.id, due_date: '1899-12-31', deadline: '3000-01-01', start_date: '0001-01-01' },
          t.call,
        ),
      ),
      ['due_date', 'deadline', 'start_date'],
    );
    assert.deepEqual(
      await badFields(nt.client.call(S.createTask, { title: 'Far', due_at: new Date('9999-12-31T12:00:00Z') }, t.call)),
      ['due_at'],
    );
    const edge = await nt.client.call(
      S.createTask,
      { title: 'Edge', due_date: '2999-12-31', start_date: '1900-01-01' },
      t.call,
    );
    assert.deepEqual([edge.due_date, edge.start_date], ['2999-12-31', '1900-01-01']);
  });

  it('lists newest first with filters; snoozed tasks are hidden unless asked for', async () => {
    const t = tenant();
    const alice = randomUUID();
    const status = randomUUID();
    const a = await create(t, { title: 'a', assignee_id: alice, due_at: new Date('2026-01-10T12:00:00Z') });
    const b = await create(t, { title: 'b', status_id: status, due_date: '2026-01-20' });
    await create(t, { title: 'c', parent_id: a.id, assignee_id: alice });
    const d = await create(t, { title: 'd', snoozed_until: new Date(Date.now() + 3_600_000) });
    const e = await create(t, { title: 'e', snoozed_until: new Date(Date.now() - 3_600_000) });
    await nt.client.call(S.completeTask, { id: b.id }, t.call);
    const titles = async (req: object) => (await nt.client.call(S.listTasks, req, t.call)).data.map((x) => x.title);
    assert.deepEqual(await titles({}), ['e', 'c', 'b', 'a']);
    assert.deepEqual(await titles({ include_snoozed: true }), ['e', 'd', 'c', 'b', 'a']);
    assert.deepEqual(await titles({ parent_id: a.id }), ['c']);
    assert.deepEqual(await titles({ top_level: true }), ['e', 'b', 'a']);
    assert.deepEqual(await titles({ assignee_id: alice }), ['c', 'a']);
    assert.deepEqual(await titles({ status_id: status }), ['b']);
    assert.deepEqual(await titles({ completed: true }), ['b']);
    assert.deepEqual(await titles({ completed: false }), ['e', 'c', 'a']);
    assert.deepEqual(await titles({ due_before: new Date('2026-01-20T00:00:00Z') }), ['a']);
    assert.deepEqual(await titles({ due_after: new Date('2026-01-20T00:00:00Z') }), ['b']);
    assert.deepEqual(
      await titles({ due_after: new Date('2026-01-01T00:00:00Z'), due_before: new Date('2026-02-01T00:00:00Z') }),
      ['b', 'a'],
    );
    const page = await nt.client.call(S.listTasks, { limit: 3, include_snoozed: true }, t.call);
    assert.deepEqual([page.data.map((x) => x.title), page.has_more], [['e', 'd', 'c'], true]);
    const rest = await nt.client.call(
      S.listTasks,
      { limit: 3, include_snoozed: true, cursor: page.next_cursor! },
      t.call,
    );
    assert.deepEqual([rest.data.map((x) => x.title), rest.has_more], [['b', 'a'], false]);
    assert.ok(d && e);
  });

  it('orders subtasks by position; moves renumber densely with before_id / after_id', async () => {
    const t = tenant();
    const p = await create(t, { title: 'P' });
    for (const title of ['a', 'b', 'c', 'd']) await create(t, { title, parent_id: p.id });
    assert.deepEqual(await order(t, p.id), [
      ['a', 1],
      ['b', 2],
      ['c', 3],
      ['d', 4],
    ]);
    const ids = Object.fromEntries((await subtasks(t, p.id)).map((x) => [x.title, x.id]));
    const moved = await nt.client.call(S.updateTask, { id: ids.d!, before_id: ids.a! }, t.call);
    assert.deepEqual([moved.position, moved.priority_key], [1, '4-0000000001']);
    assert.deepEqual(await order(t, p.id), [
      ['d', 1],
      ['a', 2],
      ['b', 3],
      ['c', 4],
    ]);
    await nt.client.call(S.updateTask, { id: ids.d!, after_id: ids.c! }, t.call);
    assert.deepEqual(await order(t, p.id), [
      ['a', 1],
      ['b', 2],
      ['c', 3],
      ['d', 4],
    ]);
    await nt.client.call(S.updateTask, { id: ids.a!, after_id: ids.b!, title: 'a2' }, t.call);
    assert.deepEqual(await order(t, p.id), [
      ['b', 1],
      ['a2', 2],
      ['c', 3],
      ['d', 4],
    ]);
    const events = await nt.events(t.id);
    assert.deepEqual(events.slice(5), ['task.moved', 'task.moved', 'task.updated', 'task.moved']);
    // An anchor under another parent, the task itself, or both anchors: 400.
    const other = await create(t, { title: 'elsewhere' });
    assert.deepEqual(await badFields(nt.client.call(S.updateTask, { id: ids.b!, before_id: other.id }, t.call)), [
      'before_id',
    ]);
    assert.deepEqual(await badFields(nt.client.call(S.updateTask, { id: ids.b!, after_id: ids.b! }, t.call)), [
      'after_id',
    ]);
    assert.deepEqual(
      await badFields(nt.client.call(S.updateTask, { id: ids.b!, before_id: ids.c!, after_id: ids.d! }, t.call)),
      ['after_id'],
    );
  });

  it('moves a task to another parent or the top level, renumbering both sides', async () => {
    const t = tenant();
    const p1 = await create(t, { title: 'P1' });
    const p2 = await create(t, { title: 'P2' });
    const [a, b, c] = [
      await create(t, { title: 'a', parent_id: p1.id }),
      await create(t, { title: 'b', parent_id: p1.id }),
      await create(t, { title: 'c', parent_id: p1.id }),
    ];
    const x = await create(t, { title: 'x', parent_id: p2.id });
    const moved = await nt.client.call(S.updateTask, { id: a.id, parent_id: p2.id, before_id: x.id }, t.call);
    assert.deepEqual([moved.parent_id, moved.position], [p2.id, 1]);
    assert.deepEqual(await order(t, p1.id), [
      ['b', 1],
      ['c', 2],
    ]);
    assert.deepEqual(await order(t, p2.id), [
      ['a', 1],
      ['x', 2],
    ]);
    const top = await nt.client.call(S.updateTask, { id: b.id, parent_id: '' }, t.call);
    assert.deepEqual([top.parent_id, top.position], [undefined, 3]);
    assert.deepEqual(await positions(t, null), [1, 2, 3]);
    assert.deepEqual(await order(t, p1.id), [['c', 1]]);
    assert.ok(c);
  });

  it('allows nesting and refuses cycles with a 400', async () => {
    const t = tenant();
    const a = await create(t, { title: 'a' });
    const b = await create(t, { title: 'b', parent_id: a.id });
    const c = await create(t, { title: 'c', parent_id: b.id });
    const d = await create(t, { title: 'd', parent_id: c.id });
    assert.equal(d.parent_id, c.id);
    for (const [id, parent] of [
      [a.id, d.id],
      [a.id, b.id],
      [b.id, c.id],
    ] as const) {
      const err = await failure(nt.client.call(S.updateTask, { id, parent_id: parent }, t.call));
      assert.deepEqual(
        [err.code, err.fieldViolations.map((v) => v.field)],
        [grpc.status.INVALID_ARGUMENT, ['parent_id']],
      );
    }
    assert.deepEqual(await badFields(nt.client.call(S.updateTask, { id: a.id, parent_id: a.id }, t.call)), [
      'parent_id',
    ]);
    assert.deepEqual(
      await badFields(nt.client.call(S.createTask, { title: 'orphan', parent_id: randomUUID() }, t.call)),
      ['parent_id'],
    );
    // Moving a whole branch elsewhere is fine.
    const moved = await nt.client.call(S.updateTask, { id: c.id, parent_id: a.id }, t.call);
    assert.deepEqual([moved.parent_id, (await subtasks(t, c.id)).map((x) => x.id)], [a.id, [d.id]]);
  });

  it('deletes a task with all its subtasks and closes the gap among its siblings', async () => {
    const t = tenant();
    const p = await create(t, { title: 'P' });
    const a = await create(t, { title: 'a', parent_id: p.id });
    const b = await create(t, { title: 'b', parent_id: p.id });
    await create(t, { title: 'c', parent_id: p.id });
    const b1 = await create(t, { title: 'b1', parent_id: b.id });
    const b11 = await create(t, { title: 'b11', parent_id: b1.id });
    await nt.client.call(S.deleteTask, { id: b.id }, t.call);
    assert.deepEqual(await order(t, p.id), [
      ['a', 1],
      ['c', 2],
    ]);
    for (const id of [b.id, b1.id, b11.id])
      assert.equal((await failure(nt.client.call(S.getTask, { id }, t.call))).code, grpc.status.NOT_FOUND);
    assert.equal((await failure(nt.client.call(S.listSubtasks, { id: b.id }, t.call))).code, grpc.status.NOT_FOUND);
    // A deleted task takes no change (a change of fields alone is one UPDATE, with no read before it).
    assert.equal(
      (await failure(nt.client.call(S.updateTask, { id: b.id, title: 'ghost' }, t.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.equal((await nt.db.query('SELECT title FROM tasks WHERE id = $1', [b.id])).rows[0].title, 'b');
    assert.equal((await nt.events(t.id)).filter((e) => e === 'task.deleted').length, 3);
    assert.ok(!(await nt.events(t.id)).includes('task.updated'), 'no event for the refused change');
    await nt.client.call(S.deleteTask, { id: p.id }, t.call);
    assert.equal((await failure(nt.client.call(S.getTask, { id: a.id }, t.call))).code, grpc.status.NOT_FOUND);
    assert.deepEqual((await nt.client.call(S.listTasks, {}, t.call)).data, []);
  });

  it('completes a task with its open subtasks; reopen affects only the task; repeats are harmless', async () => {
    const t = tenant();
    const p = await create(t, { title: 'P' });
    const a = await create(t, { title: 'a', parent_id: p.id });
    const a1 = await create(t, { title: 'a1', parent_id: a.id });
    const b = await create(t, { title: 'b', parent_id: p.id });
    const doneB = await nt.client.call(S.completeTask, { id: b.id }, t.call);
    const done = await nt.client.call(S.completeTask, { id: p.id }, t.call);
    assert.ok(done.completed_at instanceof Date);
    for (const x of await subtasks(t, p.id)) assert.ok(x.completed_at, `${x.title} completed`);
    assert.ok((await subtasks(t, a.id))[0]!.completed_at, 'grandchildren too');
    assert.deepEqual(
      (await nt.client.call(S.getTask, { id: b.id }, t.call)).completed_at,
      doneB.completed_at,
      'an already completed subtask keeps its time',
    );
    const again = await nt.client.call(S.completeTask, { id: p.id }, t.call);
    assert.deepEqual(again, done);
    const reopened = await nt.client.call(S.reopenTask, { id: p.id }, t.call);
    assert.equal(reopened.completed_at, undefined);
    assert.ok((await nt.client.call(S.getTask, { id: a1.id }, t.call)).completed_at);
    assert.deepEqual(await nt.client.call(S.reopenTask, { id: p.id }, t.call), reopened);
    const events = await nt.events(t.id);
    assert.deepEqual(events.slice(4), [
      'task.completed',
      'task.completed',
      'task.completed',
      'task.completed',
      'task.reopened',
    ]);
  });

  it('20 parallel moves within one parent end with positions 1..n, no gaps or duplicates', async () => {
    const t = tenant();
    const p = await create(t, { title: 'P' });
    const kids: Task[] = [];
    for (let i = 0; i < 20; i++) kids.push(await create(t, { title: `k${i}`, parent_id: p.id }));
    const results = await Promise.all(
      kids.map((k, i) => {
        const anchor = kids[(i * 7 + 3) % 20]!;
        const body =
          anchor.id === k.id
            ? { id: k.id, before_id: kids[(i + 1) % 20]!.id }
            : i % 2
              ? { id: k.id, before_id: anchor.id }
              : { id: k.id, after_id: anchor.id };
        return nt.client.call(S.updateTask, body, t.call);
      }),
    );
    assert.equal(results.length, 20);
    assert.deepEqual(
      await positions(t, p.id),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    const listed = await subtasks(t, p.id);
    assert.deepEqual(
      listed.map((x) => x.position),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.equal(new Set(listed.map((x) => x.id)).size, 20);
  });

  it('keeps the order dense under parallel creates, reparents and deletes', async () => {
    const t = tenant();
    const p1 = await create(t, { title: 'P1' });
    const p2 = await create(t, { title: 'P2' });
    const kids: Task[] = [];
    for (let i = 0; i < 10; i++) kids.push(await create(t, { title: `k${i}`, parent_id: p1.id }));
    await Promise.all([
      ...kids.slice(0, 4).map((k) => nt.client.call(S.updateTask, { id: k.id, parent_id: p2.id }, t.call)),
      ...kids.slice(4, 7).map((k) => nt.client.call(S.deleteTask, { id: k.id }, t.call)),
      ...Array.from({ length: 5 }, (_, i) => create(t, { title: `n${i}`, parent_id: i % 2 ? p1.id : p2.id })),
      ...kids
        .slice(7)
        .map((k) =>
          nt.client.call(S.updateTask, { id: k.id, before_id: kids[0]!.id }, t.call).catch(() => 'anchor moved away'),
        ),
    ]);
    assert.deepEqual(await positions(t, p1.id), [1, 2, 3, 4, 5]);
    assert.deepEqual(await positions(t, p2.id), [1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(await positions(t, null), [1, 2]);
  });

  it("reads a new top-level task's position from the children index, however many top-level tasks there are", async () => {
    // A create holds its sibling set's lock through this read (inside its insert): a read that
    // scans every sibling makes each create slower, and the tenant's creates queue behind it, as
    // the tenant grows. Counted in buffers, which do not depend on the machine's speed. (A
    // subtask's read also counts its siblings, for the subtask limit: bounded by that limit.)
    const t = tenant();
    await nt.db.query(
      `INSERT INTO tasks (id, tenant_id, title, position)
       SELECT gen_random_uuid(), $1, 'sibling ' || g, g FROM generate_series(1, 2000) g`,
      [t.id],
    );
    const client = await nt.db.connect();
    try {
      await client.query('BEGIN');
      const explained = explaining(client);
      const task = await insertTask(explained.db, { ...taskRow(t), position: undefined });
      assert.equal(task.position, 2001, 'last among 2,000');
      assert.ok(
        explained.initPlanBlocks() <= 12,
        `the position read touched ${explained.initPlanBlocks()} blocks for 2,000 top-level tasks (plan: ${explained.plan()})`,
      );
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it("takes a create's two locks in one statement: the tree's shared and its sibling set's", async () => {
    // The tree lock (shared) is what keeps a reparent (exclusive) out while a create places its task.
    const t = tenant();
    const client = await nt.db.connect();
    try {
      await client.query('BEGIN');
      await lockForCreate(client, t.id, null);
      const { rows } = await client.query<{ mode: string }>(
        `SELECT mode FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() ORDER BY mode`,
      );
      assert.deepEqual(
        rows.map((r) => r.mode),
        ['ExclusiveLock', 'ShareLock'],
      );
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it("reads a task's siblings from the children index, not from every task of the tenant", async () => {
    // Moves and deletes renumber the siblings under their set's lock: reading them must not cost
    // more as the tenant's other tasks grow. Counted in buffers, which do not depend on the machine.
    // The statistics know nothing of the tenant's tasks (20,000 of another tenant's were analyzed),
    // as until autovacuum's next analyze after a tenant's import: the plan must not depend on that
    // analyze having run.
    await nt.db.query(
      `INSERT INTO tasks (id, tenant_id, title, position)
       SELECT gen_random_uuid(), $1, 'elsewhere ' || g, g FROM generate_series(1, 20000) g`,
      [randomUUID()],
    );
    await nt.db.query('ANALYZE tasks');
    const t = tenant();
    const parent = await create(t, { title: 'parent' });
    const kids = [
      await create(t, { title: 'a', parent_id: parent.id }),
      await create(t, { title: 'b', parent_id: parent.id }),
    ];
    await nt.db.query(
      `INSERT INTO tasks (id, tenant_id, title, position)
       SELECT gen_random_uuid(), $1, 'other ' || g, g FROM generate_series(2, 2001) g`,
      [t.id],
    );
    for (const statistics of ['before analyze', 'after analyze']) {
      if (statistics === 'after analyze') await nt.db.query('ANALYZE tasks');
      for (const lock of [false, true]) {
        const explained = explaining();
        assert.deepEqual(
          await siblingIds(explained.db, t.id, parent.id, lock),
          kids.map((k) => k.id),
        );
        // Locking adds the rows' own lookups in id order: a few index descents more, not the tenant's other tasks.
        assert.ok(
          explained.blocks() <= (lock ? 24 : 12),
          `reading 2 subtasks${lock ? ' to lock them' : ''} touched ${explained.blocks()} blocks beside 2,001 top-level tasks, ${statistics} (plan: ${explained.plan()})`,
        );
      }
    }
    assert.equal((await siblingIds(nt.db, t.id, null)).length, 2001, 'the top level: the parent and 2,000 others');
  });

  it('keeps tenants apart', async () => {
    const a = tenant();
    const b = tenant();
    const task = await create(a, { title: 'private' });
    for (const call of [
      () => nt.client.call(S.getTask, { id: task.id }, b.call),
      () => nt.client.call(S.updateTask, { id: task.id, title: 'x' }, b.call),
      () => nt.client.call(S.deleteTask, { id: task.id }, b.call),
      () => nt.client.call(S.listSubtasks, { id: task.id }, b.call),
      () => nt.client.call(S.completeTask, { id: task.id }, b.call),
      () => nt.client.call(S.reopenTask, { id: task.id }, b.call),
    ]) {
      const err = await failure(call());
      assert.deepEqual([err.code, err.reason], [grpc.status.NOT_FOUND, 'TASK_NOT_FOUND']);
    }
    assert.deepEqual(await badFields(create(b, { title: 'x', parent_id: task.id })), ['parent_id']);
    const mine = await create(b, { title: 'mine' });
    assert.deepEqual(await badFields(nt.client.call(S.updateTask, { id: mine.id, parent_id: task.id }, b.call)), [
      'parent_id',
    ]);
    assert.deepEqual(
      (await nt.client.call(S.listTasks, {}, b.call)).data.map((x) => x.id),
      [mine.id],
    );
    assert.equal(mine.position, 1, 'positions are per tenant');
  });

  it('writes only the columns the repo lists: a task carrying any other key throws before any SQL', async () => {
    const t = tenant();
    const task = await create(t, { title: 'kept' });
    // What a request spread into the row would bring: a key that is SQL, not a column.
    const fromRequest = JSON.parse('{"title = \'x\', tenant_id": "y"}') as object;
    const row = taskRow(t, { position: 2 });
    await assert.rejects(
      insertTask(nt.db, { ...row, ...fromRequest }),
      /tasks: no writable column title = 'x', tenant_id/,
    );
    await assert.rejects(updateTask(nt.db, t.id, task.id, { title: 'changed', ...fromRequest }), /no writable column/);
    assert.deepEqual(
      (await nt.client.call(S.listTasks, {}, t.call)).data.map((x) => x.title),
      ['kept'],
      'nothing was written',
    );
    assert.equal((await insertTask(nt.db, row)).title, 'new', 'the listed columns are written');
  });

  it('refuses bad input with field violations (limits in docs/notes-tasks.md)', async () => {
    const t = tenant();
    const cases: [Partial<CreateTaskRequest>, string[]][] = [
      [{ title: '' }, ['title']],
      [{ title: 'x'.repeat(501) }, ['title']],
      [{ description: 'd'.repeat(20_001) }, ['description']],
      [{ assignee_id: 'bob' }, ['assignee_id']],
      [{ due_date: '2026-02-30', deadline: '31.12.2026' }, ['due_date', 'deadline']],
      [{ priority: 42 as TaskPriority }, ['priority']],
      [{ estimation_minutes: -1, time_spent_minutes: 1_000_001 }, ['estimation_minutes', 'time_spent_minutes']],
      [{ rrule: 'FREQ=MINUTELY', due_at: new Date() }, ['rrule']],
      [{ rrule: 'FREQ=DAILY' }, ['rrule']],
      [{ rrule: 'FREQ=DAILY', due_at: new Date(), due_date: '2026-01-01' }, ['rrule']],
      [{ rrule: 'FREQ=HOURLY', due_date: '2026-01-01' }, ['rrule']],
      [{ metadata: { x: 'y'.repeat(17_000) } }, ['metadata']],
    ];
    for (const [body, fields] of cases)
      assert.deepEqual(await badFields(create(t, body)), fields, JSON.stringify(body).slice(0, 80));
    const task = await create(t);
    assert.deepEqual(await badFields(nt.client.call(S.updateTask, { id: task.id, title: '  ' }, t.call)), ['title']);
    assert.deepEqual(await badFields(nt.client.call(S.listTasks, { parent_id: 'x', due_before: undefined }, t.call)), [
      'parent_id',
    ]);
    assert.deepEqual(
      await badFields(nt.client.call(S.completeTask, { id: task.id, occurrence: 'yesterday' }, t.call)),
      ['occurrence'],
    );
    assert.deepEqual(await nt.events(t.id), ['task.created']);
  });
});
