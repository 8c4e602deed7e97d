import * as configs from '../../repo/configs.js';
import { toConfig, type AgentsDeps, type Handler } from '../common.js';

export function listAgentConfigs({ pool }: AgentsDeps): Handler<'listAgentConfigs'> {
  return async (_req, ctx) => {
    const reduce = !ctx.allows('agents', 'admin');
    return { data: (await configs.listConfigs(pool, ctx.tenant)).map((row) => toConfig(row, reduce)) };
  };
}
