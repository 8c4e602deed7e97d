import { BUILTIN_TOOLS } from '../../tools/builtin.js';
import type { AgentsDeps, Handler } from '../common.js';
import { member, served } from './common.js';

export function listMcpTools({ tools: clients }: AgentsDeps): Handler<'listMcpTools'> {
  return async (_req, ctx) => {
    member(ctx);
    return {
      tools: BUILTIN_TOOLS.filter((t) => served(clients, t) && ctx.allows(t.access.domain, t.access.level)).map(
        (t) => ({
          name: t.name,
          description: t.description,
          input_schema: t.inputSchema,
          domain: t.access.domain,
          level: t.access.level,
        }),
      ),
    };
  };
}
