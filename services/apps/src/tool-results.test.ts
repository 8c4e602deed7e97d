/**
 * A tool's result is read up to APPS_TOOL_RESULT_MAX_BYTES and no further (real MCP servers on
 * loopback): past it the call answers with is_error and a text saying so, for JSON and SSE answers
 * and the older SSE transport alike, and a result without end is cut off (the server sees its
 * write aborted after a small part).
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Writable } from 'node:stream';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { setLogTarget } from '@workauto/logger';
import { AppStatus } from '@workauto/protos/workauto/apps/v1/apps.js';
import { S, startApps, tenant, type Apps } from './test-support.js';
import { startMcpServer, type McpTestServerOptions } from './testing/mcp-servers.js';

if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_c, _e, done) => done() }));

const LIMIT = 64 * 1024;
const text = (bytes: number): CallToolResult => ({ content: [{ type: 'text', text: 'x'.repeat(bytes) }] });

/** A tools/call answer of `total` bytes of text, written as fast as it is read; records how far it got. */
function endless(total: number, as: 'json' | 'sse') {
  let closed!: () => void;
  const seen = { sent: 0, finished: false, closed: new Promise<void>((resolve) => (closed = resolve)) };
  const streamCall = (res: ServerResponse, id: unknown) => {
    res.writeHead(200, { 'content-type': as === 'json' ? 'application/json' : 'text/event-stream' });
    res.on('close', () => closed());
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"`;
    res.write(as === 'json' ? head : `event: message\ndata: ${head}`);
    const pump = () => {
      while (seen.sent < total) {
        if (res.destroyed) return;
        seen.sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end(as === 'json' ? '"}]}}' : '"}]}}\n\n', () => (seen.finished = true));
    };
    pump();
  };
  return { seen, streamCall };
}

describe('tool results past APPS_TOOL_RESULT_MAX_BYTES', () => {
  let apps: Apps;
  const servers: { close(): Promise<void> }[] = [];
  before(async () => {
    apps = await startApps({ toolResultMaxBytes: LIMIT, toolCallTimeoutMs: 20_000 });
  });
  after(async () => {
    await apps.stop();
    await Promise.all(servers.map((s) => s.close()));
  });

  /** An app on a fresh server with its one tool `big` enabled; returns the call. */
  async function app(options: Partial<McpTestServerOptions>) {
    const t = tenant();
    const server = await startMcpServer({ transport: 'streamable', tools: [{ name: 'big' }], ...options });
    servers.push(server);
    await apps.client.call(S.createApp, { slug: 'big', display_name: 'Big', mcp_server_url: server.url }, t.call);
    const probed = await apps.client.call(S.probeApp, { slug: 'big' }, t.call);
    assert.equal(probed.status, AppStatus.APP_STATUS_HEALTHY, probed.status_reason);
    await apps.client.call(S.updateApp, { slug: 'big', enabled_tools: ['big'] }, t.call);
    return () => apps.client.call(S.callTool, { slug: 'big', name: 'big', arguments: {} }, t.call);
  }
  const assertCut = (result: Awaited<ReturnType<Awaited<ReturnType<typeof app>>>>) => {
    assert.equal(result.is_error, true);
    assert.equal(result.content.length, 1);
    assert.equal(result.content[0]!.type, 'text');
    assert.match(
      result.content[0]!.text as string,
      /^the tool's result exceeded the limit of 65536 bytes \(APPS_TOOL_RESULT_MAX_BYTES\) and was not read; call the tool again asking for less/,
    );
    assert.equal(result.structured_content, undefined);
  };

  for (const responses of ['json', 'sse'] as const) {
    it(`returns a result just under the limit whole, and one just over as is_error (${responses} answers)`, async () => {
      let bytes = LIMIT - 1024;
      const call = await app({ responses, onCall: () => text(bytes) });
      const whole = await call();
      assert.deepEqual([whole.is_error, (whole.content[0]!.text as string).length], [false, LIMIT - 1024]);
      bytes = LIMIT + 1;
      assertCut(await call());
    });
  }

  it('cuts an over-limit result on the older HTTP+SSE transport too', async () => {
    const call = await app({ transport: 'sse', onCall: () => text(LIMIT + 1) });
    assertCut(await call());
  });

  for (const as of ['json', 'sse'] as const) {
    it(`stops reading a result without end (${as}): the server's write is aborted after a small part`, async () => {
      const total = 128 * 1024 * 1024;
      const { seen, streamCall } = endless(total, as);
      const call = await app({ streamCall });
      assertCut(await call());
      await seen.closed;
      assert.equal(seen.finished, false, 'the connection closed before the server could finish');
      assert.ok(seen.sent < total / 4, `the server wrote ${seen.sent} of ${total} bytes`);
    });
  }
});

describe('tool results at the default limit', () => {
  let apps: Apps;
  const servers: { close(): Promise<void> }[] = [];
  before(async () => {
    apps = await startApps({ toolCallTimeoutMs: 20_000 });
  });
  after(async () => {
    await apps.stop();
    await Promise.all(servers.map((s) => s.close()));
  });

  it('is 1 MiB; a result under it whose message would pass gRPC’s 4 MiB is is_error too, never a 429', async () => {
    const t = tenant();
    let result: CallToolResult = text(1024 * 1024 + 1);
    const server = await startMcpServer({ transport: 'streamable', tools: [{ name: 'big' }], onCall: () => result });
    servers.push(server);
    await apps.client.call(S.createApp, { slug: 'big', display_name: 'Big', mcp_server_url: server.url }, t.call);
    await apps.client.call(S.probeApp, { slug: 'big' }, t.call);
    await apps.client.call(S.updateApp, { slug: 'big', enabled_tools: ['big'] }, t.call);
    const call = () => apps.client.call(S.callTool, { slug: 'big', name: 'big', arguments: {} }, t.call);
    const over = await call();
    assert.equal(over.is_error, true);
    assert.match(over.content[0]!.text as string, /exceeded the limit of 1048576 bytes \(APPS_TOOL_RESULT_MAX_BYTES\)/);
    // 900 KB of JSON zeros take about 5 MB as protobuf Values.
    result = { content: [{ type: 'text', text: 'zeros' }], structuredContent: { zeros: Array(450_000).fill(0) } };
    const swollen = await call();
    assert.equal(swollen.is_error, true);
    assert.match(swollen.content[0]!.text as string, /too large to return.*call the tool again asking for less/);
    result = text(1024 * 1024 - 1024);
    assert.equal((await call()).is_error, false);
  });
});
