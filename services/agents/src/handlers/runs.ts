import { withTransaction } from '@workauto/db';
import {
  accessDenied,
  errors,
  parsePage,
  timestampCursor,
  toPage,
  validate,
  type CursorCodec,
  type Handlers,
} from '@workauto/grpc';
import type { KeysetCursor } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import type { AgentsServiceService } from '@workauto/protos/workauto/agents/v1/agents.js';
import * as configs from '../repo/configs.js';
import * as runs from '../repo/runs.js';
import { accessToStart } from '../tools/builtin.js';
import { enqueueRun } from '../worker/queue.js';
import { SOURCE, blueprintOf, runData, runStatuses, toRun, toStep, type AgentsDeps } from './common.js';

type H = Handlers<typeof AgentsServiceService>;

const INPUT_MAX_BYTES = 65_536;
/** The runs list's cursor (docs/api.md §7): the created_at of the last run returned (RFC 3339); the next page is strictly older. */
const RUN_CURSOR: CursorCodec<KeysetCursor> = {
  ...timestampCursor,
  rule: 'must be an RFC 3339 timestamp: next_cursor of the previous page (the created_at of its last run)',
};

export function runHandlers(
  deps: AgentsDeps,
): Pick<H, 'createAgentRun' | 'listAgentRuns' | 'getAgentRun' | 'listAgentRunSteps' | 'cancelAgentRun'> {
  const { pool } = deps;
  return {
    async createAgentRun(req, ctx) {
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
    },

    async listAgentRuns(req, ctx) {
      const b = blueprintOf(req.blueprint);
      const page = parsePage(req, RUN_CURSOR);
      const status = runStatuses.toDomain(req.status) as runs.RunStatus | undefined;
      if (req.status !== 0 && status === undefined)
        throw errors.invalidField('status', `must be one of ${runStatuses.names.join(', ')}`);
      return toPage(await runs.listRuns(pool, ctx.tenant, b.id, status, page), toRun, RUN_CURSOR);
    },

    async getAgentRun(req, ctx) {
      const b = blueprintOf(req.blueprint);
      const row = await runs.findRun(pool, ctx.tenant, b.id, req.id);
      if (!row) throw errors.notFound('agent_run', req.id);
      return toRun(row);
    },

    async listAgentRunSteps(req, ctx) {
      const b = blueprintOf(req.blueprint);
      // The run first: another tenant's run (or another blueprint's) is a 404, not an empty list.
      const row = await runs.findRun(pool, ctx.tenant, b.id, req.id);
      if (!row) throw errors.notFound('agent_run', req.id);
      return { data: (await runs.listSteps(pool, ctx.tenant, row.id)).map(toStep) };
    },

    async cancelAgentRun(req, ctx) {
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
    },
  };
}
