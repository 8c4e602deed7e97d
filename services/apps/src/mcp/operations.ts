/** The two things the service does with an MCP server: probe it (initialize + tools/list) and call a tool. */
import { EgressResponseTooLargeError } from '@workauto/egress';
import { collectListing, type Listing } from '../domain/tools.js';
import { redactSecrets, type Failure } from '../domain/failures.js';
import { AppNeedsAuthorization } from '../domain/oauth.js';
import { McpExchangeError, withMcpSession, type SessionOptions } from './session.js';

export type ProbeOutcome = { ok: true; listing: Listing } | { ok: false; failure: Failure };

/**
 * The most one answer of a probe may hold (initialize, a tools/list page). What a listing keeps is
 * bounded by domain/tools.ts; this bounds what is read, so a server answering without end costs
 * the service at most this much memory per probe.
 */
const PROBE_ANSWER_MAX_BYTES = 4 * 1024 * 1024;

/** A real MCP session: initialize, then tools/list following nextCursor (domain/tools.ts caps it). */
export function listServerTools(options: SessionOptions): Promise<Listing> {
  return withMcpSession({ ...options, maxResponseBytes: PROBE_ANSWER_MAX_BYTES }, (client, request) =>
    collectListing(async (cursor) => client.listTools(cursor === undefined ? undefined : { cursor }, request)),
  );
}

/** A probe's outcome: the listing, or what made it fail (an exchange, an answer too large, no usable token). */
export async function probeOutcome(listing: Promise<Listing>): Promise<ProbeOutcome> {
  try {
    return { ok: true, listing: await listing };
  } catch (err) {
    if (err instanceof McpExchangeError) return { ok: false, failure: err.failure };
    if (err instanceof AppNeedsAuthorization)
      return { ok: false, failure: { status: 'needs_authorization', reason: err.reason } };
    if (err instanceof EgressResponseTooLargeError)
      return {
        ok: false,
        failure: {
          status: 'protocol_error',
          reason: `an answer of the server exceeded ${err.limit} bytes and was not read; list fewer tools per tools/list page`,
        },
      };
    throw err;
  }
}

export interface ToolResult {
  content: Record<string, unknown>[];
  isError: boolean;
  structuredContent: Record<string, unknown> | undefined;
}

/** The answer to a call whose result was too large: the tool failed, say how to ask for less. */
export function resultTooLarge(what: string): ToolResult {
  return {
    content: [
      {
        type: 'text',
        text: `the tool's result ${what}; call the tool again asking for less (a narrower query, fewer items, a smaller page)`,
      },
    ],
    isError: true,
    structuredContent: undefined,
  };
}

/**
 * Calls one tool. A result with isError, or a JSON-RPC error the server answered the call with, is a
 * ToolResult with isError true (the server worked; the tool failed), and so is a result past
 * `maxResponseBytes` (not read further); anything else throws McpExchangeError.
 */
export async function callServerTool(
  options: SessionOptions & { maxResponseBytes: number },
  name: string,
  args: Record<string, unknown>,
): Promise<ToolResult> {
  try {
    return await callOnce(options, name, args);
  } catch (err) {
    if (!(err instanceof EgressResponseTooLargeError)) throw err;
    return resultTooLarge(`exceeded the limit of ${err.limit} bytes (APPS_TOOL_RESULT_MAX_BYTES) and was not read`);
  }
}

async function callOnce(options: SessionOptions, name: string, args: Record<string, unknown>): Promise<ToolResult> {
  return redactSecrets(await callUnredacted(options, name, args), options.secrets);
}

function callUnredacted(options: SessionOptions, name: string, args: Record<string, unknown>): Promise<ToolResult> {
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
