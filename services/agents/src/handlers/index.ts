import type { Handlers } from '@workauto/grpc';
import type { AgentsServiceService } from '@workauto/protos/workauto/agents/v1/agents.js';
import type { AgentsDeps } from './common.js';
import { listAgentBlueprints } from './blueprints/list.js';
import { deleteByokKey } from './configs/delete-byok-key.js';
import { getAgentConfig } from './configs/get.js';
import { listAgentConfigs } from './configs/list.js';
import { putByokKey } from './configs/put-byok-key.js';
import { putAgentConfig } from './configs/put.js';
import { validateKey } from './configs/validate-key.js';
import { callMcpTool } from './mcp-tools/call.js';
import { listMcpTools } from './mcp-tools/list.js';
import { cancelAgentRun } from './runs/cancel.js';
import { createAgentRun } from './runs/create.js';
import { getAgentRun } from './runs/get.js';
import { listAgentRunSteps } from './runs/list-steps.js';
import { listAgentRuns } from './runs/list.js';
import { streamAgentRunEvents } from './runs/stream-events.js';

export type { AgentsDeps } from './common.js';

/** Every rpc of AgentsService, one file per rpc: handlers/<resource>/<verb>.ts. */
export function agentsHandlers(deps: AgentsDeps): Handlers<typeof AgentsServiceService> {
  return {
    listAgentBlueprints: listAgentBlueprints(),
    listAgentConfigs: listAgentConfigs(deps),
    getAgentConfig: getAgentConfig(deps),
    putAgentConfig: putAgentConfig(deps),
    validateKey: validateKey(deps),
    putByokKey: putByokKey(deps),
    deleteByokKey: deleteByokKey(deps),
    createAgentRun: createAgentRun(deps),
    listAgentRuns: listAgentRuns(deps),
    getAgentRun: getAgentRun(deps),
    listAgentRunSteps: listAgentRunSteps(deps),
    streamAgentRunEvents: streamAgentRunEvents(deps),
    listMcpTools: listMcpTools(deps),
    callMcpTool: callMcpTool(deps),
    cancelAgentRun: cancelAgentRun(deps),
  };
}
