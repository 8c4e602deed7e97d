import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { paths } from '@workauto/client';
import {
  NotesTasksServiceService as NotesTasks,
  TaskPriority,
} from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { TestClient, callAs, failure } from '@workauto/testing';
import {
  assertError,
  assertRecord,
  fails,
  ok,
  startTestStack,
  violations,
  type Kind,
  type TenantFixture,
  type TestStack,
} from './harness.js';

/** Optional fields: absent, null, or of their type (never a wrong type). */
function assertOptional(value: any, fields: Record<string, Kind>, what: string): void {
  for (const [field, kind] of Object.entries(fields)) {
    if (value[field] === undefined || value[field] === null) continue;
    assertRecord({ [field]: value[field] }, { [field]: kind }, what);
  }
}

const RECORD = {
  id: 'uuid',
  tenant_id: 'uuid',
  metadata: 'object',
  created_at: 'date-time',
  updated_at: 'date-time',
} as const;
// The Note, Tag and Task records (docs/notes-tasks.md): always-present fields, then the optional ones.
const NOTE = { ...RECORD, title: 'string', body: 'string', is_archived: 'boolean', is_pinned: 'boolean' } as const;
const NOTE_OPTIONAL = {
  deleted_at: 'date-time',
  notebook_id: 'uuid',
  source_url: 'string',
  word_count: 'integer',
} as const;
const TAG = { ...RECORD, name: 'string' } as const;
const TAG_OPTIONAL = { color: 'string', description: 'string' } as const;
const TASK = { ...RECORD, title: 'string', position: 'integer', priority: 'string', priority_key: 'string' } as const;
const TASK_OPTIONAL = {
  assignee_id: 'uuid',
  creator_id: 'uuid',
  parent_id: 'uuid',
  project_id: 'uuid',
  section_id: 'uuid',
  status_id: 'uuid',
  canceled_at: 'date-time',
  completed_at: 'date-time',
  deleted_at: 'date-time',
  due_at: 'date-time',
  next_occurrence: 'date-time',
  snoozed_until: 'date-time',
  deadline: 'string',
  due_date: 'string',
  start_date: 'string',
  description: 'string',
  external_id: 'string',
  identifier: 'string',
  rrule: 'string',
  estimation_minutes: 'integer',
  time_spent_minutes: 'integer',
} as const;

const assertNote = (n: any) => (assertRecord(n, NOTE, 'Note'), assertOptional(n, NOTE_OPTIONAL, 'Note'));
const assertTag = (t: any) => (assertRecord(t, TAG, 'Tag'), assertOptional(t, TAG_OPTIONAL, 'Tag'));
const assertTask = (t: any) => (assertRecord(t, TASK, 'Task'), assertOptional(t, TASK_OPTIONAL, 'Task'));

describe('notes-tasks end to end', () => {
  let stack: TestStack;
  let a: TenantFixture;
  let b: TenantFixture;

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 100_000 } });
    assert.ok(
      stack.services.notes_tasks,
      'deploy/embedded/src/stack.ts must start notes-tasks under the key notes_tasks',
    );
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
  });
  after(() => stack?.stop());

  const call = (method: string, path: string, key: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) });

  it('names every invalid field in one 400, shape and rules alike, as the service does over gRPC', async () => {
    const title = 'x'.repeat(501);
    const res = await fails(
      stack.client(a.key).POST('/api/v1/tasks', {
        // A bad enum (the shape) beside a too-long title, a date that does not exist and a negative estimate (the rules).
        body: { title, priority: 'highest' as 'high', due_date: '2026-02-30', estimation_minutes: -5 },
      }),
      400,
      'INVALID_ARGUMENT',
    );
    const byField = (list: { field: string; description: string }[]) =>
      Object.fromEntries(list.map((v) => [v.field, v.description]));
    const http = byField(
      res.body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest')).field_violations,
    );
    assert.deepEqual(Object.keys(http).sort(), ['due_date', 'estimation_minutes', 'priority', 'title']);
    assert.equal(http.title, 'must be at most 500 characters (after trimming)');
    assert.equal(http.due_date, '2026-02-30 is not a calendar date');
    assert.match(http.priority!, /must be one of none, low, medium, high, urgent/);

    // An agent calling notes-tasks directly gets the same violations before any handler runs.
    const grpcClient = new TestClient('notes_tasks', `127.0.0.1:${stack.services.notes_tasks!.port}`);
    try {
      const direct = await failure(
        grpcClient.call(
          NotesTasks.createTask,
          { title, priority: 42 as TaskPriority, due_date: '2026-02-30', estimation_minutes: -5 },
          callAs(a.id, a.ownerId),
        ),
      );
      const grpcViolations = byField(direct.fieldViolations);
      assert.deepEqual(Object.keys(grpcViolations).sort(), Object.keys(http).sort());
      for (const f of ['title', 'due_date', 'estimation_minutes']) assert.equal(grpcViolations[f], http[f], f);
      assert.match(grpcViolations.priority!, /must be one of none, low, medium, high, urgent/);
    } finally {
      grpcClient.close();
    }
  });

  it('serves every note endpoint with the Note record of docs/notes-tasks.md', async () => {
    const api = stack.client(a.key);
    const notebook = randomUUID();
    const n = await ok(
      api.POST('/api/v1/notes', {
        body: {
          title: 'Kickoff',
          body: 'Budget and **timeline**',
          is_pinned: true,
          notebook_id: notebook,
          source_url: 'https://example.com/a',
          metadata: { src: 'e2e' },
        },
      }),
      201,
    );
    assertNote(n);
    assert.deepEqual(
      [
        n.tenant_id,
        n.title,
        n.is_pinned,
        n.is_archived,
        n.word_count,
        n.notebook_id,
        n.source_url,
        n.deleted_at,
        n.metadata,
      ],
      [a.id, 'Kickoff', true, false, 3, notebook, 'https://example.com/a', null, { src: 'e2e' }],
    );
    const byId = { params: { path: { id: n.id } } };
    assert.deepEqual(await ok(api.GET('/api/v1/notes/{id}', byId)), n);

    const list = await ok(api.GET('/api/v1/notes', { params: { query: { limit: 10, pinned: true, q: 'TIMELINE' } } }));
    assert.deepEqual(Object.keys(list).sort(), ['data', 'has_more', 'next_cursor']);
    assert.deepEqual([list.data.map((x) => x.id), list.has_more, list.next_cursor], [[n.id], false, null]);
    for (const x of list.data) assertNote(x);

    const patched = await ok(
      api.PATCH('/api/v1/notes/{id}', {
        ...byId,
        body: { body: 'one two three four five', is_archived: true, source_url: '' },
      }),
    );
    assertNote(patched);
    assert.deepEqual([patched.word_count, patched.is_archived, patched.source_url], [5, true, null]);
    const archived = (value: boolean) => ok(api.GET('/api/v1/notes', { params: { query: { archived: value } } }));
    assert.deepEqual(
      (await archived(true)).data.map((x) => x.id),
      [n.id],
    );
    assert.deepEqual((await archived(false)).data, []);

    const del = await api.DELETE('/api/v1/notes/{id}', byId);
    assert.equal(del.response.status, 204);
    assert.equal(await del.response.text(), '');
    await fails(api.GET('/api/v1/notes/{id}', byId), 404, 'NOTE_NOT_FOUND');
    await fails(api.PATCH('/api/v1/notes/{id}', { ...byId, body: { title: 'x' } }), 404, 'NOTE_NOT_FOUND');
    await fails(api.DELETE('/api/v1/notes/{id}', byId), 404, 'NOTE_NOT_FOUND');
  });

  it('serves tag endpoints: attach by name (case-insensitive, idempotent), list, detach', async () => {
    const api = stack.client(a.key);
    const n = await ok(api.POST('/api/v1/notes', { body: { title: 'Tagged', body: '' } }), 201);
    const onNote = { params: { path: { id: n.id } } };
    const tag = (name: string) => ok(api.POST('/api/v1/notes/{id}/tags', { ...onNote, body: { name } }));
    const first = await tag(' Customer ');
    assertTag(first);
    assert.deepEqual([first.name, first.tenant_id, first.metadata], ['Customer', a.id, {}]);
    assert.deepEqual(await tag('CUSTOMER'), first);
    await tag('billing');

    const mine = await ok(api.GET('/api/v1/notes/{id}/tags', onNote));
    assert.ok(Array.isArray(mine), 'a bare array');
    assert.deepEqual(
      mine.map((x) => x.name),
      ['billing', 'Customer'],
    );
    for (const x of mine) assertTag(x);
    const all = await ok(api.GET('/api/v1/tags', { params: { query: { limit: 1 } } }));
    assert.deepEqual([all.data.length, all.has_more, typeof all.next_cursor], [1, true, 'string']);
    assertTag(all.data[0]);
    const rest = await ok(api.GET('/api/v1/tags', { params: { query: { limit: 1, cursor: all.next_cursor! } } }));
    assert.deepEqual(
      rest.data
        .map((x) => x.name)
        .concat(all.data.map((x) => x.name))
        .sort(),
      ['Customer', 'billing'],
    );
    assert.deepEqual(
      (await ok(api.GET('/api/v1/notes', { params: { query: { tag: 'customer' } } }))).data.map((x) => x.id),
      [n.id],
    );

    const detach = { params: { path: { id: n.id, tag_id: first.id } } };
    assert.equal((await api.DELETE('/api/v1/notes/{id}/tags/{tag_id}', detach)).response.status, 204);
    assert.deepEqual(
      (await ok(api.GET('/api/v1/notes/{id}/tags', onNote))).map((x) => x.name),
      ['billing'],
    );
    await fails(api.DELETE('/api/v1/notes/{id}/tags/{tag_id}', detach), 404, 'NOTE_TAG_NOT_FOUND');
  });

  it('serves backlinks: live notes of the tenant that mention the entity, most recently updated first', async () => {
    const api = stack.client(a.key);
    const contact = randomUUID();
    const backlinks = (client: typeof api, entity_type: 'contact' | 'task') =>
      ok(
        client.GET('/api/v1/backlinks/{entity_type}/{entity_id}', {
          params: { path: { entity_type, entity_id: contact } },
        }),
      );
    const titles = async (client: typeof api) => (await backlinks(client, 'contact')).map((x) => x.title);
    const n1 = await ok(
      api.POST('/api/v1/notes', { body: { title: 'first', body: `Call [[contact:${contact}|Dana]] today` } }),
      201,
    );
    const n2 = await ok(
      api.POST('/api/v1/notes', {
        body: { title: 'second', body: `[[contact:${contact}]] again, and \`[[task:${contact}]]\` is code` },
      }),
      201,
    );
    const beta = stack.client(b.key);
    await ok(beta.POST('/api/v1/notes', { body: { title: 'beta note', body: `[[contact:${contact}]]` } }), 201);
    const found = await backlinks(api, 'contact');
    assert.ok(Array.isArray(found), 'a bare array');
    for (const x of found) assertNote(x);
    assert.deepEqual(
      found.map((x) => x.title),
      ['second', 'first'],
    );
    assert.deepEqual(await backlinks(api, 'task'), [], 'a mention in a code span is not indexed');
    await ok(api.PATCH('/api/v1/notes/{id}', { params: { path: { id: n1.id } }, body: { title: 'first, edited' } }));
    assert.deepEqual(await titles(api), ['first, edited', 'second']);
    await ok(
      api.PATCH('/api/v1/notes/{id}', { params: { path: { id: n1.id } }, body: { body: 'no mention any more' } }),
    );
    await ok(api.DELETE('/api/v1/notes/{id}', { params: { path: { id: n2.id } } }), 204);
    assert.deepEqual(await titles(api), []);
    assert.deepEqual(await titles(beta), ['beta note']);

    // An entity type the API does not know: what a client without the typed paths can send.
    const unknown = await call('GET', `/backlinks/widget/${contact}`, a.key);
    assertError(unknown, 400);
    assert.deepEqual(violations(unknown), ['entity_type']);
    const notAnId = { params: { path: { entity_type: 'contact' as const, entity_id: 'not-a-uuid' } } };
    assert.deepEqual(violations(await fails(api.GET('/api/v1/backlinks/{entity_type}/{entity_id}', notAnId), 400)), [
      'entity_id',
    ]);
  });

  it('serves every task endpoint with the Task record of docs/notes-tasks.md', async () => {
    const api = stack.client(a.key);
    const t = await ok(
      api.POST('/api/v1/tasks', {
        body: {
          title: 'Launch',
          description: 'v1',
          priority: 'high',
          due_at: '2026-06-01T09:00:00Z',
          deadline: '2026-06-05',
          start_date: '2026-05-20',
          assignee_id: a.ownerId,
          estimation_minutes: 120,
          external_id: 'EXT-1',
          identifier: 'L-1',
          metadata: { team: 'core' },
        },
      }),
      201,
    );
    assertTask(t);
    assert.deepEqual(
      [
        t.tenant_id,
        t.title,
        t.priority,
        t.priority_key,
        t.position,
        t.due_at,
        t.deadline,
        t.creator_id,
        t.parent_id,
        t.completed_at,
        t.rrule,
      ],
      [
        a.id,
        'Launch',
        'high',
        '1-0000000001',
        1,
        '2026-06-01T09:00:00.000000Z',
        '2026-06-05',
        a.ownerId,
        null,
        null,
        null,
      ],
    );
    const byId = (id: string) => ({ params: { path: { id } } });
    assert.deepEqual(await ok(api.GET('/api/v1/tasks/{id}', byId(t.id))), t);

    const subs = [];
    for (const title of ['design', 'build', 'test'])
      subs.push(await ok(api.POST('/api/v1/tasks', { body: { title, parent_id: t.id } }), 201));
    const subtasks = () => ok(api.GET('/api/v1/tasks/{id}/subtasks', byId(t.id)));
    const listed = await subtasks();
    assert.ok(Array.isArray(listed), 'a bare array');
    for (const x of listed) assertTask(x);
    assert.deepEqual(
      listed.map((x) => [x.title, x.position]),
      [
        ['design', 1],
        ['build', 2],
        ['test', 3],
      ],
    );

    const moved = await ok(
      api.PATCH('/api/v1/tasks/{id}', { ...byId(subs[2]!.id), body: { before_id: subs[0]!.id, priority: 'urgent' } }),
    );
    assertTask(moved);
    assert.deepEqual([moved.position, moved.priority, moved.priority_key], [1, 'urgent', '0-0000000001']);
    assert.deepEqual(
      (await subtasks()).map((x) => x.title),
      ['test', 'design', 'build'],
    );

    const tasks = (query: paths['/api/v1/tasks']['get']['parameters']['query']) =>
      ok(api.GET('/api/v1/tasks', { params: { query } }));
    const page = await tasks({ parent_id: t.id, limit: 2 });
    assert.deepEqual(Object.keys(page).sort(), ['data', 'has_more', 'next_cursor']);
    assert.deepEqual([page.data.map((x) => x.title), page.has_more], [['test', 'build'], true]);
    assert.deepEqual(
      (await tasks({ due_before: '2026-06-02T00:00:00Z', due_after: '2026-06-01T00:00:00Z' })).data.map((x) => x.id),
      [t.id],
    );
    assert.deepEqual(
      (await tasks({ assignee_id: a.ownerId, completed: false, top_level: true })).data.map((x) => x.id),
      [t.id],
    );

    const done = await ok(api.POST('/api/v1/tasks/{id}/complete', byId(t.id)));
    assertTask(done);
    assert.match(String(done.completed_at), /Z$/);
    for (const x of await subtasks()) assert.ok(x.completed_at, 'subtasks complete with their parent');
    assert.deepEqual(
      await ok(api.POST('/api/v1/tasks/{id}/complete', byId(t.id))),
      done,
      'a second completion changes nothing',
    );
    const reopened = await ok(api.POST('/api/v1/tasks/{id}/reopen', { ...byId(t.id), body: {} }));
    assert.equal(reopened.completed_at, null);
    assert.deepEqual((await tasks({ completed: true })).data.map((x) => x.title).sort(), ['build', 'design', 'test']);

    assert.equal((await api.DELETE('/api/v1/tasks/{id}', byId(t.id))).response.status, 204);
    for (const x of [t, ...subs]) await fails(api.GET('/api/v1/tasks/{id}', byId(x.id)), 404, 'TASK_NOT_FOUND');
    await fails(api.GET('/api/v1/tasks/{id}/subtasks', byId(t.id)), 404, 'TASK_NOT_FOUND');
  });

  it('advances a recurring task once per occurrence', async () => {
    const t = (
      await call('POST', '/tasks', a.key, {
        title: 'Weekly sync',
        due_at: '2026-01-05T10:00:00Z',
        rrule: 'FREQ=WEEKLY;BYDAY=MO',
      })
    ).body;
    assert.deepEqual([t.rrule, t.next_occurrence], ['FREQ=WEEKLY;BYDAY=MO', '2026-01-12T10:00:00.000000Z']);
    const body = { occurrence: t.due_at };
    const first = await call('POST', `/tasks/${t.id}/complete`, a.key, body);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(
      [first.body.due_at, first.body.next_occurrence, first.body.completed_at],
      ['2026-01-12T10:00:00.000000Z', '2026-01-19T10:00:00.000000Z', null],
    );
    const retry = await call('POST', `/tasks/${t.id}/complete`, a.key, body);
    assert.deepEqual(retry.body, first.body, 'the same occurrence again: nothing skipped');
    assertError(
      await call('POST', `/tasks/${t.id}/complete`, a.key, { occurrence: '2026-01-26T10:00:00Z' }),
      409,
      'OCCURRENCE_NOT_CURRENT',
    );

    // Without occurrence, a retry with the same Idempotency-Key (the gateway replays) advances once too.
    const headers = { 'idempotency-key': randomUUID() };
    const once = await stack.api('POST', `/api/v1/tasks/${t.id}/complete`, { key: a.key, headers });
    const twice = await stack.api('POST', `/api/v1/tasks/${t.id}/complete`, { key: a.key, headers });
    assert.deepEqual([once.status, twice.status], [200, 200], JSON.stringify(twice.body));
    assert.deepEqual(twice.body, once.body);
    assert.equal(once.body.due_at, '2026-01-19T10:00:00.000000Z');
    assert.equal((await call('GET', `/tasks/${t.id}`, a.key)).body.due_at, '2026-01-19T10:00:00.000000Z');
  });

  it('keeps positions dense under 20 parallel moves, and tags single under 20 parallel attaches', async () => {
    const api = stack.client(a.key);
    const parent = await ok(api.POST('/api/v1/tasks', { body: { title: 'Backlog' } }), 201);
    const kids: (typeof parent)[] = [];
    for (let i = 0; i < 20; i++)
      kids.push(await ok(api.POST('/api/v1/tasks', { body: { title: `item ${i}`, parent_id: parent.id } }), 201));
    await Promise.all(
      kids.map((k, i) =>
        ok(
          api.PATCH('/api/v1/tasks/{id}', {
            params: { path: { id: k.id } },
            body: i % 2 ? { before_id: kids[(i + 5) % 20]!.id } : { after_id: kids[(i + 3) % 20]!.id },
          }),
        ),
      ),
    );
    const after = await ok(api.GET('/api/v1/tasks/{id}/subtasks', { params: { path: { id: parent.id } } }));
    assert.deepEqual(
      after.map((x) => x.position),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.equal(new Set(after.map((x) => x.id)).size, 20);

    const note = await ok(api.POST('/api/v1/notes', { body: { title: 'race', body: '' } }), 201);
    const onNote = { params: { path: { id: note.id } } };
    const attaches = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        ok(api.POST('/api/v1/notes/{id}/tags', { ...onNote, body: { name: i % 2 ? 'Hot' : 'hot' } })),
      ),
    );
    assert.equal(new Set(attaches.map((tag) => tag.id)).size, 1);
    assert.deepEqual(
      (await ok(api.GET('/api/v1/notes/{id}/tags', onNote))).map((x) => x.id),
      [attaches[0]!.id],
    );
    const hot = (await ok(api.GET('/api/v1/tags', { params: { query: { limit: 200 } } }))).data.filter(
      (x) => x.name.toLowerCase() === 'hot',
    );
    assert.equal(hot.length, 1);
  });

  it('binds a cursor to its list and filters: another list’s cursor, or other filters, is a 400 on cursor', async () => {
    const api = stack.client(a.key);
    for (let i = 0; i < 3; i++) {
      await ok(api.POST('/api/v1/notes', { body: { title: `paged ${i}` } }), 201);
      await ok(api.POST('/api/v1/tasks', { body: { title: `paged ${i}` } }), 201);
    }
    const first = await ok(api.GET('/api/v1/notes', { params: { query: { limit: 1, q: 'paged' } } }));
    assert.ok(first.next_cursor);
    const cursor = first.next_cursor;
    // The same list and filters continue, whatever the page size.
    const next = await ok(api.GET('/api/v1/notes', { params: { query: { limit: 2, q: 'paged', cursor } } }));
    assert.deepEqual(
      next.data.map((n) => n.title),
      ['paged 1', 'paged 0'],
    );
    for (const [what, call] of [
      ['GET /tasks', api.GET('/api/v1/tasks', { params: { query: { cursor } } })],
      ['another q', api.GET('/api/v1/notes', { params: { query: { q: 'other', cursor } } })],
      ['no q', api.GET('/api/v1/notes', { params: { query: { cursor } } })],
      ['an added filter', api.GET('/api/v1/notes', { params: { query: { q: 'paged', pinned: true, cursor } } })],
    ] as const) {
      const res = await fails(call, 400, 'INVALID_ARGUMENT');
      assert.deepEqual(violations(res), ['cursor'], what);
      assert.match(res.body.error.message, /another list or other filters/, what);
    }
  });

  it('answers bad input with 400 in the error shape of docs/api.md §5', async () => {
    const note = (await call('POST', '/notes', a.key, { title: 'v', body: '' })).body;
    const top = (await call('POST', '/tasks', a.key, { title: 'top' })).body;
    const child = (await call('POST', '/tasks', a.key, { title: 'child', parent_id: top.id })).body;
    const cases: [string, string, unknown, string][] = [
      ['POST', '/notes', { title: 'x'.repeat(501) }, 'title'],
      ['POST', '/notes', { title: 42 }, 'title'],
      ['POST', '/notes', { title: 'x', is_pinned: 'yes' }, 'is_pinned'],
      ['POST', '/notes', { title: 'x', colour: 'red' }, 'colour'],
      ['POST', '/notes', { title: 'x', body: 'y'.repeat(100_001) }, 'body'],
      ['POST', '/notes', { title: 'x', metadata: [1] }, 'metadata'],
      ['PATCH', `/notes/${note.id}`, { title: 'x'.repeat(501) }, 'title'],
      ['POST', `/notes/${note.id}/tags`, { name: '' }, 'name'],
      ['POST', `/notes/${note.id}/tags`, { name: 'x'.repeat(65) }, 'name'],
      ['POST', `/notes/${note.id}/tags`, { name: ['a'] }, 'name'],
      ['GET', '/notes?archived=maybe', undefined, 'archived'],
      ['GET', '/notes?limit=0', undefined, 'limit'],
      ['GET', '/notes/not-a-uuid', undefined, 'id'],
      ['POST', '/tasks', { title: '' }, 'title'],
      ['POST', '/tasks', { title: 'x'.repeat(501) }, 'title'],
      ['POST', '/tasks', { title: 'x', priority: 'critical' }, 'priority'],
      ['POST', '/tasks', { title: 'x', priority: 'HIGH' }, 'priority'],
      ['POST', '/tasks', { title: 'x', due_at: 'tomorrow' }, 'due_at'],
      ['POST', '/tasks', { title: 'x', due_date: '2026-02-30' }, 'due_date'],
      ['POST', '/tasks', { title: 'x', estimation_minutes: 1.5 }, 'estimation_minutes'],
      ['POST', '/tasks', { title: 'x', estimation_minutes: '10' }, 'estimation_minutes'],
      ['POST', '/tasks', { title: 'x', parent_id: randomUUID() }, 'parent_id'],
      ['POST', '/tasks', { title: 'x', rrule: 'FREQ=DAILY' }, 'rrule'],
      ['POST', '/tasks', { title: 'x', rrule: 'every day', due_at: '2026-01-01T00:00:00Z' }, 'rrule'],
      ['POST', '/tasks', { title: 'x', position: 3 }, 'position'],
      ['PATCH', `/tasks/${top.id}`, { parent_id: child.id }, 'parent_id'],
      ['PATCH', `/tasks/${top.id}`, { parent_id: top.id }, 'parent_id'],
      ['PATCH', `/tasks/${child.id}`, { before_id: top.id }, 'before_id'],
      ['PATCH', `/tasks/${child.id}`, { title: null }, 'title'],
      ['POST', `/tasks/${top.id}/complete`, { occurrence: 'now' }, 'occurrence'],
      ['GET', '/tasks?due_before=yesterday', undefined, 'due_before'],
      ['GET', '/tasks?completed=1', undefined, 'completed'],
      ['GET', '/tasks?assignee_id=bob', undefined, 'assignee_id'],
      ['GET', '/tasks?sort=title', undefined, 'sort'],
    ];
    const wrong: string[] = [];
    for (const [method, path, body, field] of cases) {
      const res = await call(method, path, a.key, body);
      if (res.status !== 400 || !violations(res).includes(field))
        wrong.push(
          `${method} ${path} ${JSON.stringify(body)?.slice(0, 60)} → ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`,
        );
      else assertError(res, 400);
    }
    assert.deepEqual(wrong, []);
    assert.equal(
      (await call('GET', `/tasks/${top.id}`, a.key)).body.parent_id,
      null,
      'the refused cycle changed nothing',
    );
  });

  it('keeps tenants apart: 404 on every by-id endpoint, nothing in lists or backlinks', async () => {
    const contact = randomUUID();
    const note = (await call('POST', '/notes', a.key, { title: 'Private note', body: `[[contact:${contact}]]` })).body;
    const tag = (await call('POST', `/notes/${note.id}/tags`, a.key, { name: 'private-tag' })).body;
    const task = (await call('POST', '/tasks', a.key, { title: 'Private task' })).body;
    const cases: [string, string, unknown?][] = [
      ['GET', `/notes/${note.id}`],
      ['PATCH', `/notes/${note.id}`, { title: 'taken' }],
      ['DELETE', `/notes/${note.id}`],
      ['POST', `/notes/${note.id}/tags`, { name: 'x' }],
      ['GET', `/notes/${note.id}/tags`],
      ['DELETE', `/notes/${note.id}/tags/${tag.id}`],
      ['GET', `/tasks/${task.id}`],
      ['PATCH', `/tasks/${task.id}`, { title: 'taken' }],
      ['DELETE', `/tasks/${task.id}`],
      ['GET', `/tasks/${task.id}/subtasks`],
      ['POST', `/tasks/${task.id}/complete`, {}],
      ['POST', `/tasks/${task.id}/reopen`, {}],
    ];
    const leaks: string[] = [];
    for (const [method, path, body] of cases) {
      const res = await call(method, path, b.key, body);
      if (res.status !== 404) leaks.push(`${method} ${path} → ${res.status}`);
      else assertError(res, 404);
    }
    assert.deepEqual(leaks, []);
    for (const path of ['/notes', '/tags', '/tasks', `/backlinks/contact/${contact}`]) {
      const body = (await call('GET', path, b.key)).body;
      assert.equal(
        JSON.stringify(body).includes('Private') || JSON.stringify(body).includes('private-tag'),
        false,
        `${path} of another tenant shows nothing of Alpha`,
      );
    }
    assert.deepEqual((await call('GET', `/backlinks/contact/${contact}`, b.key)).body, []);
    assert.equal((await call('GET', `/notes/${note.id}`, a.key)).body.title, 'Private note');
    assert.equal((await call('GET', `/tasks/${task.id}`, a.key)).body.title, 'Private task');
  });

  it('lets a viewer read notes and tasks but not write them', async () => {
    const inv = await call('POST', '/invitations', a.key, {
      email: `viewer-${randomUUID()}@alpha.test`,
      role: 'viewer',
    });
    assert.equal(inv.status, 201, JSON.stringify(inv.body));
    const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    const viewer = claimed.body.api_key as string;
    for (const path of ['/notes', '/tags', '/tasks', `/backlinks/task/${randomUUID()}`])
      assert.equal((await call('GET', path, viewer)).status, 200, path);
    assertError(await call('POST', '/notes', viewer, { title: 'nope' }), 403);
    assertError(await call('POST', '/tasks', viewer, { title: 'nope' }), 403);
    assertError(await stack.api('GET', '/api/v1/notes'), 401);
  });
});
