import { withTransaction } from '@workauto/db';
import { validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { guardrailViolations } from '../../domain/guardrails.js';
import { modelViolations, type KeyTarget, type ModelFields } from '../../domain/models.js';
import { nextTick, scheduleProblem } from '../../domain/schedule.js';
import * as configs from '../../repo/configs.js';
import { SOURCE, blueprintOf, configData, toConfig, type AgentsDeps, type Handler } from '../common.js';
import { baseUrlProblem, baseUrlOf, providerField } from './common.js';

/** The stored key of a config row as the model rules see it. */
const keyTarget = (row: configs.ConfigRow | undefined): KeyTarget | undefined =>
  row?.byok_provider ? { provider: row.byok_provider, base_url: row.base_url } : undefined;

export function putAgentConfig(deps: AgentsDeps): Handler<'putAgentConfig'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    const schedule = req.schedule?.trim() ? req.schedule.trim() : null;
    const guardrails = req.guardrails ?? [];
    const v = validate();
    if (schedule !== null) {
      const problem = scheduleProblem(schedule);
      if (problem) v.add('schedule', problem);
    }
    for (const violation of guardrailViolations(guardrails)) v.add(violation.field, violation.description);
    const model: ModelFields = {
      provider: providerField(v, req.provider ?? 0) ?? null,
      model: req.model ?? null,
      base_url: baseUrlOf(req.base_url),
      input_price_cents_per_mtok: req.input_price_cents_per_mtok ?? null,
      output_price_cents_per_mtok: req.output_price_cents_per_mtok ?? null,
    };
    const urlProblem = model.base_url === null ? undefined : baseUrlProblem(deps, model.base_url);
    if (urlProblem) v.add('base_url', urlProblem);
    v.done();
    const fields: configs.ConfigFields = {
      budget_default_cents: req.budget_default_cents ?? null,
      deadline_default_seconds: req.deadline_default_seconds ?? null,
      guardrails,
      schedule,
      schedule_next_at: schedule ? nextTick(schedule, deps.now()) : null,
      ...model,
    };
    return withTransaction(
      pool,
      async (tx) => {
        // The stored key decides what provider and base_url may be: locked, so a key set meanwhile cannot slip between.
        const current = await configs.findConfig(tx, ctx.tenant, b.id, { lock: true });
        const mv = validate();
        for (const violation of modelViolations(model, keyTarget(current), b))
          mv.add(violation.field, violation.description);
        mv.done();
        const row = await configs.replaceConfig(tx, ctx.tenant, b.id, fields);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'agent_config.updated',
          resourceType: 'agent_config',
          resourceId: row.id,
          data: configData(row),
          metadata: {
            budget_default_cents: fields.budget_default_cents,
            deadline_default_seconds: fields.deadline_default_seconds,
            guardrails,
            schedule,
            ...model,
          },
        });
        return toConfig(row);
      },
      { signal: ctx.signal },
    );
  };
}
