import { errors } from '@workauto/grpc';
import * as configs from '../../repo/configs.js';
import { blueprintOf, toConfig, type AgentsDeps, type Handler } from '../common.js';

export function getAgentConfig({ pool }: AgentsDeps): Handler<'getAgentConfig'> {
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    const row = await configs.findConfig(pool, ctx.tenant, b.id);
    if (!row) throw errors.notFound('agent_config', b.id);
    return toConfig(row, !ctx.allows('agents', 'admin'));
  };
}
