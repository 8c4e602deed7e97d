/**
 * The MCP server's tools over real gRPC: offered by the caller's levels, called as the caller on
 * real notes-tasks and crm-pipelines (the records are the member's), each call audited.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { decodeEvent } from '@workauto/events';
import type { AccessLevels } from '@workauto/grpc';
import { NotesTasksServiceService as Notes } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import { S, failure, startRunStack, tenant, withAccess } from './test-support.js';

const OWNER: AccessLevels = { agents: 'admin', tasks: 'admin', notes: 'admin', crm: 'admin', calendar: 'admin' };
const MEMBER: AccessLevels = { agents: 'read', tasks: 'write', notes: 'write', crm: 'write', calendar: 'write' };
const VIEWER: AccessLevels = { tasks: 'read', notes: 'read', crm: 'read', calendar: 'read' };

describe('MCP tools (ListMcpTools, CallMcpTool)', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  before(async () => {
    stack = await startRunStack();
  });
  after(async () => {
    await stack?.stop();
  });

  it('lists the built-in tools the caller may use, with their schemas; a tool whose service is not configured is absent', async () => {
    const t = tenant();
    const names = async (access: AccessLevels) =>
      (await stack.client.call(S.listMcpTools, {}, withAccess(t, access))).tools.map((x) => x.name);
    // This stack has no calendar service: list_calendar_events is never offered.
    assert.deepEqual(await names(OWNER), [
      'list_tasks',
      'create_task',
      'search_notes',
      'create_note',
      'list_deals',
      'pipeline_summary',
    ]);
    assert.deepEqual(await names(VIEWER), ['list_tasks', 'search_notes', 'list_deals', 'pipeline_summary']);
    assert.deepEqual(await names({ tasks: 'write' }), ['list_tasks', 'create_task']);
    const { tools } = await stack.client.call(S.listMcpTools, {}, withAccess(t, MEMBER));
    const create = tools.find((x) => x.name === 'create_task')!;
    assert.deepEqual([create.domain, create.level], ['tasks', 'write']);
    assert.equal(create.input_schema!.type, 'object');
    assert.deepEqual(create.input_schema!.required, ['title']);
  });

  it('calls a tool as the member (its record and the call audited under its name); refusals are tool errors', async () => {
    const t = tenant();
    const member = withAccess(t, MEMBER);
    const created = await stack.client.call(
      S.callMcpTool,
      { name: 'create_task', arguments: { title: 'From Claude', priority: 'high' } },
      member,
    );
    assert.equal(created.is_error, false, created.text);
    assert.equal(created.structured_content!.title, 'From Claude');
    assert.equal(JSON.parse(created.text).id, created.structured_content!.id);
    const { rows } = await stack.notesDb.query(
      `SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'task.created'`,
      [t.id],
    );
    assert.equal(rows.length, 1);
    assert.deepEqual(
      decodeEvent(rows[0].payload).actor,
      { type: 'api_key', id: member.caller.actor!.id, member_id: t.memberId },
      "the member's key made the task, not an agent",
    );

    // A viewer may not create: the tool answers why, naming the domain, and nothing is made.
    const refused = await stack.client.call(
      S.callMcpTool,
      { name: 'create_task', arguments: { title: 'Not allowed' } },
      withAccess(t, VIEWER),
    );
    assert.equal(refused.is_error, true);
    assert.match(refused.text, /create_task needs write access to tasks; your access there is read/);
    // Bad arguments and a record the service does not find: the service's sentence, as a tool error.
    const bad = await stack.client.call(S.callMcpTool, { name: 'create_task', arguments: { title: '' } }, member);
    assert.deepEqual([bad.is_error, bad.text], [true, 'title is required']);
    const missing = await stack.client.call(
      S.callMcpTool,
      { name: 'pipeline_summary', arguments: { pipeline_id: '0193a000-0000-7000-8000-000000000000' } },
      member,
    );
    assert.equal(missing.is_error, true);
    assert.match(missing.text, /not found/);
    const tasks = await stack.notesClient.call(Notes.listTasks, {}, t.call);
    assert.deepEqual(
      tasks.data.map((x) => x.title),
      ['From Claude'],
      'only the member’s task exists',
    );

    const audit = await stack.db.query(
      `SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'mcp_tool.called' ORDER BY seq`,
      [t.id],
    );
    const entries = audit.rows.map((r) => decodeEvent(r.payload));
    assert.deepEqual(
      entries.map((e) => [e.resource!.id, e.metadata.outcome, e.metadata.member_id]),
      [
        ['create_task', 'ok', t.memberId],
        ['create_task', 'access_denied', t.memberId],
        ['create_task', 'is_error', t.memberId],
        ['pipeline_summary', 'is_error', t.memberId],
      ],
    );
    for (const e of entries) assert.equal(JSON.stringify(e.metadata).includes('From Claude'), false, 'no arguments');

    // An unknown tool is not a tool's answer: a 404 the gateway turns into invalid params.
    const unknown = await failure(stack.client.call(S.callMcpTool, { name: 'drop_tables' }, member));
    assert.equal(unknown.code, grpc.status.NOT_FOUND);
    assert.match(unknown.message, /no tool "drop_tables": tools\/list names the tools this key may call/);
  });
});
