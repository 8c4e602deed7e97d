import type { EventType } from './types.js';

/** Events of the agents service (docs/events.md § agents). Never a provider key in any of them. */
export const AGENTS_EVENT_TYPES: readonly EventType[] = [
  {
    name: 'agent_config.updated',
    description: 'An agent config was replaced (PUT /agent-configs/{blueprint}), or a run changed its byok_status.',
  },
  {
    name: 'agent_config.byok_key_set',
    description: 'A provider key passed its probe and was stored encrypted for a blueprint (never the key).',
  },
  {
    name: 'agent_config.byok_key_removed',
    description: "A blueprint's provider key was removed; byok_status is unset.",
  },
  { name: 'agent_run.created', description: 'An agent run was queued, by a client or by the schedule.' },
  { name: 'agent_run.started', description: 'A worker started an agent run.' },
  { name: 'agent_run.succeeded', description: 'An agent run ended with a final answer.' },
  { name: 'agent_run.failed', description: 'An agent run failed; failure_category and failure_detail say why.' },
  { name: 'agent_run.cancelled', description: 'An agent run was cancelled while queued or running.' },
  {
    name: 'mcp_tool.called',
    description:
      "A tool of the product's MCP server (POST /api/v1/mcp) was called by a member's key: tool, outcome, duration; never the arguments or the result.",
  },
];
