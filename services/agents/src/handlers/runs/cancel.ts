import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as runs from '../../repo/runs.js';
import { SOURCE, blueprintOf, runData, toRun, type AgentsDeps, type Handler } from '../common.js';

export function cancelAgentRun({ pool }: AgentsDeps): Handler<'cancelAgentRun'> {
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    return withTransaction(
      pool,
      async (tx) => {
        const row = await runs.findRun(tx, ctx.tenant, b.id, req.id, { lock: true });
        if (!row) throw errors.notFound('agent_run', req.id);
        if (row.status === 'cancelled') return toRun(row);
        if (row.status === 'succeeded' || row.status === 'failed') {
          throw errors.failedPrecondition(
            'AGENT_RUN_FINISHED',
            `run ${row.id} already ${row.status}; only queued or running runs can be cancelled`,
          );
        }
        const cancelled = await runs.cancelRun(tx, ctx.tenant, row.id);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'agent_run.cancelled',
          resourceType: 'agent_run',
          resourceId: row.id,
          data: runData(cancelled),
          metadata: { from_status: row.status },
        });
        return toRun(cancelled);
      },
      { signal: ctx.signal },
    );
  };
}
