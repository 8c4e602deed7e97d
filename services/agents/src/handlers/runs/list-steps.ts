import { errors } from '@workauto/grpc';
import * as runs from '../../repo/runs.js';
import { blueprintOf, toStep, type AgentsDeps, type Handler } from '../common.js';

export function listAgentRunSteps({ pool }: AgentsDeps): Handler<'listAgentRunSteps'> {
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    // The run first: another tenant's run (or another blueprint's) is a 404, not an empty list.
    const row = await runs.findRun(pool, ctx.tenant, b.id, req.id);
    if (!row) throw errors.notFound('agent_run', req.id);
    return { data: (await runs.listSteps(pool, ctx.tenant, row.id)).map(toStep) };
  };
}
