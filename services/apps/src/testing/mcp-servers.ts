/**
 * Third parties for the apps tests: real MCP servers built with the official SDK's server side on
 * loopback (Streamable HTTP, and SSE only for the fallback), and HTTP servers that are not MCP
 * servers (401/403, HTML, 500, hanging, down). Used by the service tests and the end-to-end tests.
 */
import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from '@workauto/config';

export interface TestTool {
  name: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
}

export interface ToolCallSeen {
  name: string;
  arguments: Record<string, unknown>;
  /** The request's headers (lowercase names). */
  headers: Record<string, string | string[] | undefined>;
}

export interface McpTestServerOptions {
  transport: 'streamable' | 'sse';
  /** The credential the server requires: a header and its exact value (e.g. authorization: Bearer x). */
  auth?: { header: string; value: string };
  tools?: TestTool[];
  /** Tools per tools/list page (default: all on one). */
  pageSize?: number;
  /** 'repeat': every page after the first names the same cursor again; 'endless': a new cursor forever. */
  cursors?: 'normal' | 'repeat' | 'endless';
  /** What a tool call returns (default: echoes its arguments as text and structured content). */
  onCall?: (name: string, args: Record<string, unknown>) => CallToolResult;
  /** Streamable HTTP: answer requests with a JSON body (default) or an SSE stream. */
  responses?: 'json' | 'sse';
  /** Streamable HTTP: writes the HTTP answer to tools/call itself (a result streamed without end, …). */
  streamCall?: (res: ServerResponse, requestId: unknown) => void;
}

export interface McpTestServer {
  url: string;
  /** Change the tools the next listing returns. */
  tools: TestTool[];
  calls: ToolCallSeen[];
  /** Every HTTP request's method, path and headers, in order. */
  requests: { method: string; path: string; headers: Record<string, string | string[] | undefined> }[];
  /** initialize requests answered (one per probe or call). */
  initializes: number;
  /** When each initialize arrived, and its URL (path and query). */
  initializeLog: { at: number; url: string }[];
  close(): Promise<void>;
}

const echo = (name: string, args: Record<string, unknown>): CallToolResult => ({
  content: [{ type: 'text', text: `${name}:${JSON.stringify(args)}` }],
  structuredContent: { tool: name, arguments: args },
});

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

async function listen(server: http.Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** A real MCP server (the SDK's low-level Server: pagination under the test's control). */
export async function startMcpServer(options: McpTestServerOptions): Promise<McpTestServer> {
  const state: McpTestServer = {
    url: '',
    tools: options.tools ?? [],
    calls: [],
    requests: [],
    initializes: 0,
    initializeLog: [],
    close: async () => undefined,
  };
  let currentHeaders: IncomingMessage['headers'] = {};

  const build = () => {
    // The SDK's low-level Server (deprecated but for advanced uses): this one lists tools with raw JSON
    // Schemas and pages them with cursors a test chooses, which McpServer does not let it control.
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    const server = new Server({ name: 'test-mcp', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, (request) => {
      const size = options.pageSize ?? Math.max(1, state.tools.length);
      const page = request.params?.cursor ? Number(request.params.cursor.replace(/^c/, '')) : 0;
      const tools = state.tools.slice(page * size, (page + 1) * size).map((t) => ({
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        inputSchema: { type: 'object' as const, ...(t.inputSchema ?? {}) },
      }));
      let nextCursor: string | undefined;
      if (options.cursors === 'repeat') nextCursor = 'c1';
      else if (options.cursors === 'endless' || (page + 1) * size < state.tools.length) nextCursor = `c${page + 1}`;
      return { tools, ...(nextCursor ? { nextCursor } : {}) };
    });
    server.setRequestHandler(CallToolRequestSchema, (request) => {
      const args = request.params.arguments ?? {};
      state.calls.push({ name: request.params.name, arguments: args, headers: currentHeaders });
      return (options.onCall ?? echo)(request.params.name, args);
    });
    server.oninitialized = () => undefined;
    return server;
  };

  // The older HTTP+SSE transport (deprecated in the SDK) is what the servers the client falls back for speak.
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  const sse = new Map<string, SSEServerTransport>();
  const httpServer = http.createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0]!;
    state.requests.push({ method: req.method ?? '', path, headers: req.headers });
    if (options.auth && req.headers[options.auth.header.toLowerCase()] !== options.auth.value) {
      res
        .writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' })
        .end('{"error":"unauthorized"}');
      return;
    }
    currentHeaders = req.headers;
    if (options.transport === 'streamable') {
      if (path !== '/mcp') return void res.writeHead(404).end();
      if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
      const body = await readJson(req);
      const method = (body as { method?: string } | undefined)?.method;
      if (method === 'initialize') {
        state.initializes++;
        state.initializeLog.push({ at: Date.now(), url: req.url ?? '' });
      }
      if (method === 'tools/call' && options.streamCall) return options.streamCall(res, (body as { id: unknown }).id);
      // Stateless: a server and a transport per request.
      const server = build();
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: options.responses !== 'sse',
      });
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    if (req.method === 'GET' && path === '/sse') {
      // eslint-disable-next-line @typescript-eslint/no-deprecated -- the older transport, as above
      const transport = new SSEServerTransport('/messages', res);
      sse.set(transport.sessionId, transport);
      res.on('close', () => sse.delete(transport.sessionId));
      await build().connect(transport);
      return;
    }
    if (req.method === 'POST' && path === '/messages') {
      const transport = sse.get(new URL(req.url ?? '', 'http://x').searchParams.get('sessionId') ?? '');
      if (!transport) return void res.writeHead(404).end('no session');
      const body = await readJson(req);
      if ((body as { method?: string } | undefined)?.method === 'initialize') state.initializes++;
      await transport.handlePostMessage(req, res, body);
      return;
    }
    res.writeHead(404).end('not found');
  };
  const base = await listen(httpServer);
  state.url = `${base}${options.transport === 'streamable' ? '/mcp' : '/sse'}`;
  state.close = () => closeServer(httpServer);
  return state;
}

/** A server built with the SDK's high-level McpServer (tools registered with zod schemas), Streamable HTTP. */
export async function startHighLevelMcpServer(auth?: { header: string; value: string }): Promise<McpTestServer> {
  const state: McpTestServer = {
    url: '',
    tools: [],
    calls: [],
    requests: [],
    initializes: 0,
    initializeLog: [],
    close: async () => undefined,
  };
  const build = (headers: IncomingMessage['headers']) => {
    const server = new McpServer({ name: 'high-level', version: '1.0.0' });
    server.registerTool(
      'add',
      { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
      ({ a, b }) => {
        state.calls.push({ name: 'add', arguments: { a, b }, headers });
        return { content: [{ type: 'text', text: String(a + b) }] };
      },
    );
    server.registerTool('fail', { description: 'Always fails' }, () => ({
      content: [{ type: 'text', text: 'it broke' }],
      isError: true,
    }));
    return server;
  };
  const httpServer = http.createServer((req, res) => {
    void (async () => {
      state.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
      if (auth && req.headers[auth.header.toLowerCase()] !== auth.value) return void res.writeHead(401).end();
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const body = await readJson(req);
      if ((body as { method?: string } | undefined)?.method === 'initialize') state.initializes++;
      const server = build(req.headers);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    })().catch(() => res.writeHead(500).end());
  });
  state.url = `${await listen(httpServer)}/mcp`;
  state.close = () => closeServer(httpServer);
  return state;
}

/** An HTTP server that answers every request the same way (not an MCP server). */
export async function startPlainServer(
  answer: { status: number; contentType?: string; body?: string; headers?: Record<string, string> } | 'hang',
): Promise<{ url: string; hits: number; paths: string[]; close(): Promise<void> }> {
  const state = { url: '', hits: 0, paths: [] as string[], close: async () => undefined as void };
  const server = http.createServer((req, res) => {
    state.hits++;
    state.paths.push(req.url ?? '');
    if (answer === 'hang') return; // never answers
    res
      .writeHead(answer.status, { 'content-type': answer.contentType ?? 'text/html', ...answer.headers })
      .end(answer.body ?? '<html><body>Hello</body></html>');
  });
  state.url = `${await listen(server)}/mcp`;
  state.close = () => closeServer(server);
  return state;
}

/** A URL on loopback where nothing listens. */
export async function downUrl(): Promise<string> {
  const server = http.createServer();
  const url = await listen(server);
  await closeServer(server);
  return `${url}/mcp`;
}
