import { withTransaction } from '@workauto/db';
import { accessDenied, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as configs from '../../repo/configs.js';
import * as runs from '../../repo/runs.js';
import { accessToStart } from '../../tools/builtin.js';
import { enqueueRun } from '../../worker/queue.js';
import { SOURCE, blueprintOf, runData, toRun, type AgentsDeps, type Handler } from '../common.js';

const INPUT_MAX_BYTES = 65_536;

export function createAgentRun({ pool }: AgentsDeps): Handler<'createAgentRun'> {
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    // The run acts in other domains than agents: its starter must be allowed there too.
    for (const { domain, level } of accessToStart(b))
      if (!ctx.allows(domain, level)) throw accessDenied(domain, level, ctx.level(domain), `starting a ${b.id} run`);
    const v = validate();
    if (req.input !== undefined && Buffer.byteLength(JSON.stringify(req.input)) > INPUT_MAX_BYTES)
      v.add('input', `must be at most ${INPUT_MAX_BYTES} bytes of JSON`);
    v.done();
    return withTransaction(
      pool,
      async (tx) => {
        const config = await configs.findConfig(tx, ctx.tenant, b.id);
        const row = (await runs.insertRun(tx, {
          tenant_id: ctx.tenant,
          agent_blueprint: b.id,
          input: req.input ?? null,
          run_at: req.run_at ?? null,
          budget_usd_cents: req.budget_usd_cents ?? config?.budget_default_cents ?? null,
          deadline_seconds: req.deadline_seconds ?? config?.deadline_default_seconds ?? null,
          starter_access: ctx.actor?.access ?? null,
        }))!;
        await enqueueRun(tx, row);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'agent_run.created',
          resourceType: 'agent_run',
          resourceId: row.id,
          data: runData(row),
        });
        return toRun(row);
      },
      { signal: ctx.signal },
    );
  };
}
