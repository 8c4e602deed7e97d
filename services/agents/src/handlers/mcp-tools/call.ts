import { withTransaction } from '@workauto/db';
import * as grpc from '@grpc/grpc-js';
import { DomainError, decodeStatusDetails, type CallContext } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { ToolInputError, builtinTool, checkDeclaredArguments, type BuiltinTool } from '../../tools/builtin.js';
import { ToolUnavailable } from '../../tools/clients.js';
import { SOURCE, type AgentsDeps, type Handler } from '../common.js';
import { member, served } from './common.js';

/** gRPC codes that are the service's answer about the arguments, not its health. */
const INPUT_CODES = new Set([3, 5, 6, 7, 9, 11]); // INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION, OUT_OF_RANGE

/** How a call ended, as its audit entry says (never the arguments or the result). */
type Outcome = 'ok' | 'is_error' | 'access_denied' | 'unavailable';

export function callMcpTool(deps: AgentsDeps): Handler<'callMcpTool'> {
  const { pool, tools: clients } = deps;

  async function audit(ctx: CallContext, tool: BuiltinTool, outcome: Outcome, startedAt: number, memberId: string) {
    // Its own transaction after the call (which wrote elsewhere, if anything), without the
    // caller's signal: a caller that gave up still gets its call audited, as app tool calls are.
    await withTransaction(pool, (tx) =>
      recordEvent(tx, SOURCE, ctx, {
        type: 'mcp_tool.called',
        resourceType: 'mcp_tool',
        resourceId: tool.name,
        metadata: {
          tool: tool.name,
          outcome,
          duration_ms: Math.round(performance.now() - startedAt),
          member_id: memberId,
        },
      }),
    );
  }

  return async (req, ctx) => {
    const { memberId } = member(ctx);
    const tool = builtinTool(req.name);
    if (!tool || !served(clients, tool))
      throw new DomainError(
        grpc.status.NOT_FOUND,
        'MCP_TOOL_NOT_FOUND',
        `there is no tool ${JSON.stringify(req.name.slice(0, 100))}: tools/list names the tools this key may call`,
      );
    const startedAt = performance.now();
    const { domain, level } = tool.access;
    if (!ctx.allows(domain, level)) {
      await audit(ctx, tool, 'access_denied', startedAt, memberId);
      return {
        text: `${tool.name} needs ${level} access to ${domain}; your access there is ${ctx.level(domain)}. Ask an admin to change your role or access policy`,
        is_error: true,
      };
    }
    let outcome: Outcome = 'ok';
    let answer: { text: string; is_error: boolean; structured_content?: Record<string, unknown> };
    try {
      const args = req.arguments ?? {};
      checkDeclaredArguments(tool, args);
      const result = await tool.call(args, ctx, clients);
      answer = {
        text: JSON.stringify(result),
        is_error: false,
        ...(isObject(result) ? { structured_content: result } : {}),
      };
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      const refusal = toolRefusal(err);
      if (!refusal) throw err;
      outcome = refusal.outcome;
      answer = { text: refusal.text, is_error: true };
    }
    await audit(ctx, tool, outcome, startedAt, memberId);
    return answer;
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A failure the tool's caller reads as the tool's answer (is_error); undefined: a bug, thrown as INTERNAL. */
function toolRefusal(err: unknown): { outcome: Outcome; text: string } | undefined {
  if (err instanceof ToolInputError) return { outcome: 'is_error', text: err.message };
  if (err instanceof ToolUnavailable) return { outcome: 'unavailable', text: err.message };
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'number' || !('metadata' in (err as object))) return undefined;
  const message = decodeStatusDetails(err as never).message;
  if (INPUT_CODES.has(code)) return { outcome: 'is_error', text: message };
  return { outcome: 'unavailable', text: `${message}; try the call again later` };
}
