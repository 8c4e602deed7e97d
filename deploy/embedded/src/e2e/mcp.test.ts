/**
 * The product as an MCP server (POST /api/v1/mcp) through the gateway, with the official MCP SDK's
 * client over Streamable HTTP and an API key as Bearer: the tools a member's role allows, called as
 * that member on the real services, each call and what it creates in the audit log.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, LATEST_PROTOCOL_VERSION, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { captureLogs, eventually } from '@workauto/testing';
import { assertError, startTestStack, type TenantFixture, type TestStack } from './harness.js';

describe('MCP server at /api/v1/mcp', () => {
  let stack: TestStack;
  let a: TenantFixture;
  let member: { key: string; id: string };
  let viewer: { key: string; id: string };
  const clients: Client[] = [];

  const call = (method: string, path: string, key: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) });

  /** The official SDK's client, connected through the gateway with an API key. */
  async function connect(key: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const client = new Client({ name: 'e2e', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/api/v1/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${key}` } },
    });
    await client.connect(transport);
    clients.push(client);
    return { client, transport };
  }

  const names = async (key: string) => ((await (await connect(key)).client.listTools()).tools ?? []).map((t) => t.name);
  const text = (r: CallToolResult) => (r.content[0] as { text: string }).text;

  before(async () => {
    stack = await startTestStack();
    a = await stack.createTenant('Alpha');
    const invite = async (role: string) => {
      const inv = await call('POST', '/invitations', a.key, { email: `${role}-${randomUUID()}@alpha.test`, role });
      const claimed = (await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } })).body;
      return { key: claimed.api_key as string, id: claimed.member.id as string };
    };
    member = await invite('member');
    viewer = await invite('viewer');
  });
  after(async () => {
    for (const c of clients) await c.close();
    await stack?.stop();
  });

  it('speaks stateless Streamable HTTP: initialize without a session, 401 without a key, 405 for GET and DELETE', async () => {
    const { client, transport } = await connect(a.key);
    assert.equal(client.getServerVersion()?.name, 'workauto');
    assert.equal(transport.sessionId, undefined, 'stateless: no session');
    assert.ok(transport.protocolVersion! >= '2025-06-18', transport.protocolVersion);
    assert.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION);

    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    };
    const post = (headers: Record<string, string>) =>
      stack.api('POST', '/api/v1/mcp', {
        headers: { accept: 'application/json, text/event-stream', ...headers },
        body: initialize,
      });
    const raw = await post({ authorization: `Bearer ${a.key}` });
    assert.equal(raw.status, 200);
    assert.equal(raw.headers.get('mcp-session-id'), null);
    assert.equal(raw.body.result.protocolVersion, '2025-06-18', 'a client of 2025-06-18 gets it');
    assertError(await post({}), 401);
    assertError(await post({ authorization: 'Bearer wk_not_a_key_at_all_00000000000000000000' }), 401);
    for (const method of ['GET', 'DELETE']) {
      const res = await stack.api(method, '/api/v1/mcp', { key: a.key });
      assertError(res, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(res.headers.get('allow'), 'POST');
    }
  });

  it('lists the tools the key’s member may use: an owner all, a viewer only the reading ones', async () => {
    assert.deepEqual(await names(a.key), [
      'list_tasks',
      'create_task',
      'search_notes',
      'create_note',
      'list_deals',
      'pipeline_summary',
      'list_calendar_events',
    ]);
    assert.deepEqual(await names(viewer.key), [
      'list_tasks',
      'search_notes',
      'list_deals',
      'pipeline_summary',
      'list_calendar_events',
    ]);
    const { tools } = await (await connect(member.key)).client.listTools();
    const create = tools.find((t) => t.name === 'create_task')!;
    assert.equal(create.inputSchema.type, 'object');
    assert.deepEqual(create.inputSchema.required, ['title']);
    assert.equal(create.annotations?.readOnlyHint, false);
  });

  it('refuses a JSON-RPC batch with -32600 before any of its calls runs, duplicate ids included', async () => {
    const before = (await call('GET', '/tasks', a.key)).body.data.length;
    const createTask = (id: number, title: string) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'create_task', arguments: { title } },
    });
    for (const batch of [
      [createTask(1, 'batched one'), createTask(2, 'batched two')],
      [createTask(7, 'same id'), createTask(7, 'same id again')],
    ]) {
      const res = await fetch(`${stack.url}/api/v1/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${a.key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
        },
        body: JSON.stringify(batch),
      });
      assert.equal(res.status, 400);
      const body = (await res.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
      assert.deepEqual([body.jsonrpc, body.id, body.error.code], ['2.0', null, -32600]);
      assert.match(body.error.message, /batches are not supported.*send each request in a POST of its own/);
    }
    assert.equal((await call('GET', '/tasks', a.key)).body.data.length, before, 'no call of a batch ran');
  });

  it("answers a tool's time no timestamp holds, or a NUL byte, as a tool error naming the field, logged at warn at most", async () => {
    const { client } = await connect((await stack.createTenant('Gamma')).key); // its own audit log
    const logs = captureLogs();
    let far: CallToolResult;
    let nul: CallToolResult;
    try {
      far = (await client.callTool({
        name: 'list_calendar_events',
        arguments: { from: '+275760-09-13T00:00:00Z' },
      })) as CallToolResult;
      nul = (await client.callTool({ name: 'create_task', arguments: { title: 'a\u0000b' } })) as CallToolResult;
    } finally {
      logs.stop();
    }
    assert.deepEqual([far.isError, text(far)], [true, 'from must be an RFC 3339 time like 2026-11-23T09:00:00Z']);
    assert.equal(nul.isError, true, text(nul));
    assert.doesNotMatch(text(nul), /try the call again later/, 'bad input is not said to pass');
    assert.deepEqual(
      logs.lines.filter((l) => /"level":"(error|fatal)"/.test(l)),
      [],
      'nothing a client sent is logged as an error of ours',
    );
  });

  it('creates a task as the member: in GET /tasks and the audit log under the member’s key; a viewer’s create is a tool error', async () => {
    const title = `From MCP ${randomUUID()}`;
    const { client } = await connect(member.key);
    const created = (await client.callTool({ name: 'create_task', arguments: { title } })) as CallToolResult;
    assert.equal(created.isError, false, text(created));
    const task = created.structuredContent as { id: string; title: string };
    assert.equal(task.title, title);
    assert.equal(JSON.parse(text(created)).id, task.id);
    const listed = await call('GET', '/tasks', member.key);
    assert.deepEqual(
      listed.body.data
        .filter((t: { title: string }) => t.title.startsWith('From MCP'))
        .map((t: { id: string }) => t.id),
      [task.id],
    );

    const refused = (await (
      await connect(viewer.key)
    ).client.callTool({ name: 'create_task', arguments: { title: 'Not allowed' } })) as CallToolResult;
    assert.equal(refused.isError, true);
    assert.match(text(refused), /create_task needs write access to tasks; your access there is read/);
    const bad = (await client.callTool({ name: 'create_task', arguments: { title: 42 } })) as CallToolResult;
    assert.deepEqual([bad.isError, text(bad)], [true, 'title must be text of at most 500 characters']);
    // An argument the tool's input schema does not declare (a typo) is a tool error naming it; nothing is made.
    const typo = (await client.callTool({
      name: 'create_task',
      arguments: { title: 'Typo', titel: 'Typo', prio: 'high' },
    })) as CallToolResult;
    assert.deepEqual(
      [typo.isError, text(typo)],
      [
        true,
        'create_task does not take the arguments titel, prio; its arguments are title, description, priority, due_date',
      ],
    );
    assert.equal(
      (await call('GET', '/tasks', a.key)).body.data.filter((t: { title: string }) => t.title === 'Typo').length,
      0,
    );
    await assert.rejects(
      client.callTool({ name: 'drop_everything', arguments: {} }),
      (err: unknown) =>
        err instanceof McpError && err.code === (ErrorCode.InvalidParams as number) && /tools\/list/.test(err.message),
    );
    // Only the member's task was made (the viewer's refusal made nothing).
    assert.equal(
      (await call('GET', '/tasks', a.key)).body.data.filter((t: { title: string }) => t.title === 'Not allowed').length,
      0,
    );

    // The audit log: the task by the member's key (not an agent), and every call with the member.
    const keyOf = async (k: string) => (await call('GET', '/api-keys', k)).body.data[0].id as string;
    const memberKey = await keyOf(member.key);
    await eventually('the task is audited', async () =>
      (await call('GET', '/audit-log?action=task.created', a.key)).body.data.some(
        (e: { resource_id: string }) => e.resource_id === task.id,
      ),
    );
    const taskEntry = (await call('GET', '/audit-log?action=task.created', a.key)).body.data.find(
      (e: { resource_id: string }) => e.resource_id === task.id,
    );
    assert.deepEqual([taskEntry.actor_type, taskEntry.actor_id], ['api_key', memberKey]);
    const calls = async () => (await call('GET', '/audit-log?action=mcp_tool.called', a.key)).body.data;
    await eventually('the four calls are audited', async () => (await calls()).length === 4);
    const [typoCall, badCall, refusedCall, okCall] = await calls(); // newest first
    assert.deepEqual(
      [okCall.actor_id, okCall.resource_type, okCall.resource_id, okCall.metadata.outcome, okCall.metadata.member_id],
      [memberKey, 'mcp_tool', 'create_task', 'ok', member.id],
    );
    assert.deepEqual(
      [refusedCall.actor_id, refusedCall.metadata.outcome, refusedCall.metadata.member_id],
      [await keyOf(viewer.key), 'access_denied', viewer.id],
    );
    assert.equal(badCall.metadata.outcome, 'is_error');
    assert.equal(typoCall.metadata.outcome, 'is_error');
    assert.equal(okCall.member_id, member.id, 'the audit entry names the member whose key called');
    assert.ok(!JSON.stringify(await calls()).includes(title), 'never the arguments');
  });
});
