/**
 * `POST /api/v1/mcp`: the product itself as an MCP server (Streamable HTTP, stateless: no session,
 * every request stands alone, JSON answers). The gateway hosts the protocol with the official SDK
 * and authenticates the API key as for any route; the tools are the agents service's built-in
 * tools (ListMcpTools, CallMcpTool), called with the caller's signed identity, so what a tool may
 * do and what it creates follow the key's member (its levels, the audit log's actor).
 */
import type { NextFunction, Request, Response } from 'express';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import * as grpc from '@grpc/grpc-js';
import { callerAudience, type Caller, type CallerSigner, type Downstream } from '@workauto/grpc';
import { AgentsServiceService as Agents } from '@workauto/protos/workauto/agents/v1/agents.js';
import { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import type { Authenticator } from './auth.js';
import { gatewayErrors, toHttpError } from './errors.js';
import { addPrincipal, requestCaller } from './proxy.js';
import { AUTHENTICATED } from './rate-limit.js';

const MCP_PATH = '/api/v1/mcp';

/** Any active member's API key; what it may use is each tool's own level (the agents service filters). */
const MCP_POLICY = { auth: 'api_key', method: 'POST', domain: '', level: 'none' } as const;

/** A tool call reaches another service through agents (30 s at most there), plus a margin. */
const CALL_DEADLINE_MS = 35_000;

const IDENTITY_AUDIENCE = callerAudience(IdentityServiceService.authenticateToken.path);
const AGENTS_AUDIENCE = callerAudience(Agents.listMcpTools.path);

export function mcpEndpoint(downstreams: Map<string, Downstream>, auth: Authenticator, signer: CallerSigner) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    if ((req.originalUrl.split('?')[0] ?? '') !== MCP_PATH) return next();
    res.locals.route = MCP_PATH;
    // Stateless: no stream to GET, no session to DELETE.
    if (req.method !== 'POST') throw gatewayErrors.methodNotAllowed(req.method, ['POST']);
    // A JSON-RPC batch would run each of its calls under one request's limits. MCP 2025-06-18
    // removed batching: refused as an invalid request before anything runs (duplicate ids included).
    if (Array.isArray(req.body)) {
      res.status(400).json({
        jsonrpc: '2.0',
        id: null,
        error: {
          code: ErrorCode.InvalidRequest,
          message:
            'batches are not supported (MCP 2025-06-18 removed JSON-RPC batching): send each request in a POST of its own',
        },
      });
      return;
    }
    try {
      const anonymous = requestCaller(req, res.locals.requestId as string);
      const principal = await auth.authorize(MCP_POLICY, req, () => signer.metadata(anonymous, IDENTITY_AUDIENCE));
      res.locals[AUTHENTICATED] = true; // the failed-auth limiter never blocks this credential
      const agents = downstreams.get('agents');
      if (!agents) throw gatewayErrors.notConfigured('agents', 'AGENTS_ADDR');
      const server = mcpServer(agents, addPrincipal(anonymous, principal!), signer, res.locals.requestId as string);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } finally {
      auth.finished(req); // the tenant's concurrency slot, taken by authorize
    }
  };
}

/**
 * One request's server: its handlers call the agents service as the request's caller.
 *
 * The SDK's low-level `Server`, which it marks deprecated except "for advanced use cases": this is one.
 * The tools, their JSON Schemas and the caller's right to each come from the agents service per request;
 * `McpServer` takes only zod schemas registered before the request, so it would restate the schemas and
 * cost a ListMcpTools call before every tools/call.
 */
// eslint-disable-next-line @typescript-eslint/no-deprecated
function mcpServer(agents: Downstream, caller: Caller, signer: CallerSigner, requestId: string): Server {
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- as above
  const server = new Server(
    { name: 'workauto', title: 'workauto', version: '1.0.0' },
    {
      capabilities: { tools: {} },
      instructions:
        "Tools of a workauto tenant's notes, tasks, deals, pipelines and calendar, acting as the API key's member: " +
        'only the tools its role and access policies allow are listed, and what they create is audited under its name.',
    },
  );
  const metadata = () => signer.metadata(caller, AGENTS_AUDIENCE);
  const { tenantId: tenant } = caller;

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const { tools } = await agentsCall(
      () => agents.call(Agents.listMcpTools, {}, { metadata: metadata(), tenant }),
      requestId,
    );
    return {
      tools: tools.map((t): Tool => ({
        name: t.name,
        description: t.description,
        inputSchema: t.input_schema as Tool['inputSchema'],
        annotations: { readOnlyHint: t.level === 'read', destructiveHint: false, openWorldHint: false },
      })),
    };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const answer = await agentsCall(
      () =>
        agents.call(
          Agents.callMcpTool,
          { name: request.params.name, arguments: request.params.arguments ?? {} },
          { metadata: metadata(), deadlineMs: CALL_DEADLINE_MS, tenant },
        ),
      requestId,
    );
    return {
      content: [{ type: 'text', text: answer.text }],
      isError: answer.is_error,
      ...(answer.structured_content ? { structuredContent: answer.structured_content } : {}),
    };
  });
  return server;
}

/**
 * An agents call whose failure becomes a JSON-RPC error: an unknown tool is invalid params (as the
 * SDK's own servers answer it), anything else an internal error with the message the REST API
 * would give (never a downstream's internals).
 */
async function agentsCall<T>(call: () => Promise<T>, requestId: string): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const { body } = toHttpError(err, requestId);
    const message = (body as { error: { message: string } }).error.message;
    const code = (err as { code?: unknown }).code;
    throw new McpError(code === grpc.status.NOT_FOUND ? ErrorCode.InvalidParams : ErrorCode.InternalError, message);
  }
}
