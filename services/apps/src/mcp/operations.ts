/** The two things the service does with an MCP server: probe it (initialize + tools/list) and call a tool. */
import { collectListing, type Listing } from '../domain/tools.js';
import type { Failure } from '../domain/failures.js';
import { McpExchangeError, withMcpSession, type SessionOptions } from './session.js';

export type ProbeOutcome = { ok: true; listing: Listing } | { ok: false; failure: Failure };

/** A real MCP session: initialize, then tools/list following nextCursor (domain/tools.ts caps it). */
export async function probeServer(options: SessionOptions): Promise<ProbeOutcome> {
  try {
    const listing = await withMcpSession(options, (client, request) =>
      collectListing(async (cursor) => client.listTools(cursor === undefined ? undefined : { cursor }, request)),
    );
    return { ok: true, listing };
  } catch (err) {
    if (err instanceof McpExchangeError) return { ok: false, failure: err.failure };
    throw err;
  }
}

export interface ToolResult {
  content: Record<string, unknown>[];
  isError: boolean;
  structuredContent: Record<string, unknown> | undefined;
}

/**
 * Calls one tool. A result with isError, or a JSON-RPC error the server answered the call with, is a
 * ToolResult with isError true (the server worked; the tool failed); anything else throws
 * McpExchangeError.
 */
export async function callServerTool(
  options: SessionOptions,
  name: string,
  args: Record<string, unknown>,
): Promise<ToolResult> {
  return withMcpSession(options, async (client, request) => {
    let result: Awaited<ReturnType<typeof client.callTool>>;
    try {
      result = await client.callTool({ name, arguments: args }, undefined, request);
    } catch (err) {
      // -32000 (connection closed) and -32001 (request timeout) are the SDK's own: the server did not answer.
      const code = (err as { code?: unknown }).code;
      if ((err as Error).name === 'McpError' && typeof code === 'number' && code !== -32000 && code !== -32001) {
        return {
          content: [{ type: 'text', text: (err as Error).message }],
          isError: true,
          structuredContent: undefined,
        };
      }
      throw err;
    }
    const content = Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : [];
    const structured = result.structuredContent;
    return {
      content,
      isError: result.isError === true,
      structuredContent:
        structured && typeof structured === 'object' && !Array.isArray(structured)
          ? (structured as Record<string, unknown>)
          : undefined,
    };
  });
}
