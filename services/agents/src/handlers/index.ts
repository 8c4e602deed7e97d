import type { Handlers } from '@workauto/grpc';
import type { AgentsServiceService } from '@workauto/protos/workauto/agents/v1/agents.js';
import type { AgentsDeps } from './common.js';
import { configHandlers } from './configs.js';
import { mcpHandlers } from './mcp.js';
import { runEventHandlers } from './run-events.js';
import { runHandlers } from './runs.js';

export type { AgentsDeps } from './common.js';

/**
 * Every rpc of AgentsService: blueprints, configs and keys in configs.ts, runs in runs.ts, a run's
 * live events in run-events.ts, the MCP server's tools in mcp.ts.
 */
export function agentsHandlers(deps: AgentsDeps): Handlers<typeof AgentsServiceService> {
  return { ...configHandlers(deps), ...runHandlers(deps), ...runEventHandlers(deps), ...mcpHandlers(deps) };
}
