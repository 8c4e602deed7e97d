import { errors } from '@workauto/grpc';
import * as runs from '../../repo/runs.js';
import { blueprintOf, toRun, type AgentsDeps, type Handler } from '../common.js';

export function getAgentRun({ pool }: AgentsDeps): Handler<'getAgentRun'> {
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    const row = await runs.findRun(pool, ctx.tenant, b.id, req.id);
    if (!row) throw errors.notFound('agent_run', req.id);
    return toRun(row);
  };
}
