/**
 * The product as an MCP server (the gateway hosts the protocol at /api/v1/mcp and calls these):
 * the built-in tools agents use, offered to an API key's member under its own levels and called
 * as that member, so what a tool creates is audited with the member as actor.
 */
import { errors, type CallContext } from '@workauto/grpc';
import type { BuiltinTool } from '../../tools/builtin.js';
import type { ToolClients } from '../../tools/clients.js';

/** The tools act as a member: its signed levels decide what it may call. */
export function member(ctx: CallContext): { memberId: string } {
  const memberId = ctx.actor?.memberId;
  if (!memberId || !ctx.actor.access)
    throw errors.permissionDenied(
      'MEMBER_REQUIRED',
      "the MCP tools act as a member: call /api/v1/mcp with a member's API key",
    );
  return { memberId };
}

/** A tool whose service this deployment does not reach is not offered, as to runs. */
export const served = (clients: ToolClients, tool: BuiltinTool) => clients.has(tool.service);
