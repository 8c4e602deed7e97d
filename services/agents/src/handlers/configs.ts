import { withTransaction } from '@workauto/db';
import {
  DomainError,
  errors,
  parsePage,
  toPage,
  validate,
  type CursorCodec,
  type Handlers,
  type Validator,
} from '@workauto/grpc';
import * as grpc from '@grpc/grpc-js';
import { Keyring } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import type { AgentsServiceService, ProbeResult } from '@workauto/protos/workauto/agents/v1/agents.js';
import { ProbeStatus } from '@workauto/protos/workauto/agents/v1/agents.js';
import { BLUEPRINTS, type Blueprint } from '../domain/blueprints.js';
import { guardrailViolations } from '../domain/guardrails.js';
import { modelViolations, type KeyTarget, type ModelFields } from '../domain/models.js';
import { nextTick, scheduleProblem } from '../domain/schedule.js';
import { INDETERMINATE, ProviderError, providerOfKey, type ProviderErrorCategory } from '../providers/index.js';
import * as configs from '../repo/configs.js';
import {
  SOURCE,
  blueprintOf,
  configData,
  keyContext,
  probeCategories,
  providers as providerNames,
  toBlueprint,
  toConfig,
  type AgentsDeps,
  type ProviderName,
} from './common.js';

type H = Handlers<typeof AgentsServiceService>;

// Printable ASCII without spaces: what a provider key is, and what an HTTP header can carry.
const API_KEY = /^[\x21-\x7e]{8,1024}$/;
const API_KEY_RULE = 'must be the provider key: 8 to 1024 printable ASCII characters without spaces';

/** A blueprints page continues after the blueprint whose id the cursor names (base64url). */
const BLUEPRINT_CURSOR: CursorCodec<string> = {
  decode: (text) => {
    const id = Buffer.from(text, 'base64url').toString();
    return BLUEPRINTS.some((b) => b.id === id && Buffer.from(id).toString('base64url') === text) ? id : undefined;
  },
  encode: (id) => Buffer.from(id).toString('base64url'),
};

/** The probe's category as ProbeResult shows it: a request the provider could not serve says nothing about the key either. */
const probeCategory = (c: ProviderErrorCategory) => (c === 'bad_request' ? 'provider_unavailable' : c);

/** Probes a key (at a tenant's base_url, if given); returns the provider's refusal as a ProviderError, or undefined when the key is valid. */
async function probe(
  deps: AgentsDeps,
  provider: ProviderName,
  apiKey: string,
  baseUrl: string | null,
  signal: AbortSignal,
): Promise<ProviderError | undefined> {
  try {
    await deps.providers[provider].probe({ apiKey, baseURL: baseUrl ?? undefined }, signal);
    return undefined;
  } catch (err) {
    if (err instanceof ProviderError) return err;
    throw err;
  }
}

/** Why the egress policy refuses a base_url as written (bad form, scheme, whitespace, a refused literal address), if it does. */
function baseUrlProblem(deps: AgentsDeps, url: string): string | undefined {
  try {
    deps.egress.checkUrl(url, 'base_url');
    return undefined;
  } catch (err) {
    if (err instanceof DomainError) return err.extra.fieldViolations?.[0]?.description ?? err.message;
    throw err;
  }
}

/** An optional base_url field: unset or empty is none. */
const baseUrlOf = (value: string | undefined): string | null => (value ? value : null);

/** The provider field of a request: undefined when unset (0); a value outside the enum is a violation. */
function providerField(v: Validator, value: number): ProviderName | undefined {
  if (value !== 0 && providerNames.toDomain(value) === undefined)
    v.add('provider', `must be one of ${providerNames.names.join(', ')}`);
  return providerNames.toDomain(value) as ProviderName | undefined;
}

/** A key request's fields checked; the provider defaults to `fallback` (the config's), else by the key's prefix. */
function checkKeyRequest(
  deps: AgentsDeps,
  req: { api_key: string; provider: number; base_url?: string | undefined },
  fallback?: ProviderName,
): { provider: ProviderName; baseUrl: string | null } {
  const v = validate().check(API_KEY.test(req.api_key), 'api_key', API_KEY_RULE);
  const provider = providerField(v, req.provider);
  const baseUrl = baseUrlOf(req.base_url);
  const problem = baseUrl === null ? undefined : baseUrlProblem(deps, baseUrl);
  if (problem) v.add('base_url', problem);
  v.done();
  return { provider: provider ?? fallback ?? providerOfKey(req.api_key), baseUrl };
}

/** The stored key of a config row as the model rules see it. */
const keyTarget = (row: configs.ConfigRow | undefined): KeyTarget | undefined =>
  row?.byok_provider ? { provider: row.byok_provider, base_url: row.base_url } : undefined;

export function configHandlers(
  deps: AgentsDeps,
): Pick<
  H,
  | 'listAgentBlueprints'
  | 'listAgentConfigs'
  | 'getAgentConfig'
  | 'putAgentConfig'
  | 'validateKey'
  | 'putByokKey'
  | 'deleteByokKey'
> {
  const { pool } = deps;
  return {
    async listAgentBlueprints(req) {
      // A short registry in code, paged over the array by its ids.
      const page = parsePage(req, BLUEPRINT_CURSOR);
      const start = page.after === undefined ? 0 : BLUEPRINTS.findIndex((b) => b.id === page.after) + 1;
      const rows = BLUEPRINTS.slice(start, start + page.size);
      const more = start + page.size < BLUEPRINTS.length;
      return toPage(
        { rows, keys: rows.map((b) => b.id), ...(more ? { next: rows.at(-1)!.id } : {}) },
        toBlueprint,
        BLUEPRINT_CURSOR,
      );
    },

    async listAgentConfigs(_req, ctx) {
      const reduce = !ctx.allows('agents', 'admin');
      return { data: (await configs.listConfigs(pool, ctx.tenant)).map((row) => toConfig(row, reduce)) };
    },

    async getAgentConfig(req, ctx) {
      const b = blueprintOf(req.blueprint);
      const row = await configs.findConfig(pool, ctx.tenant, b.id);
      if (!row) throw errors.notFound('agent_config', b.id);
      return toConfig(row, !ctx.allows('agents', 'admin'));
    },

    async putAgentConfig(req, ctx) {
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
    },

    async validateKey(req, ctx) {
      const { provider, baseUrl } = checkKeyRequest(deps, req);
      const refusal = await probe(deps, provider, req.api_key, baseUrl, ctx.signal);
      if (!refusal) return { status: ProbeStatus.PROBE_STATUS_VALID, category: 0 } satisfies ProbeResult;
      return {
        status: ProbeStatus.PROBE_STATUS_INVALID,
        category: probeCategories.fromDomain(probeCategory(refusal.category)),
        message: refusal.message,
      };
    },

    async putByokKey(req, ctx) {
      const b = blueprintOf(req.blueprint);
      const before = await configs.findConfig(pool, ctx.tenant, b.id);
      const { provider, baseUrl } = checkKeyRequest(deps, req, before?.provider ?? undefined);
      const conflict = providerConflict(b, before, provider);
      if (conflict) throw errors.invalidField('provider', conflict);
      const refusal = await probe(deps, provider, req.api_key, baseUrl, ctx.signal);
      if (refusal) {
        const category = probeCategory(refusal.category);
        if (INDETERMINATE.has(category)) {
          throw errors.unavailable(
            'BYOK_PROBE_UNAVAILABLE',
            `the key could not be checked: ${refusal.message}; nothing was stored and the previous key stays`,
            { category },
          );
        }
        throw new DomainError(
          grpc.status.INVALID_ARGUMENT,
          'BYOK_KEY_INVALID',
          `the key was refused: ${refusal.message}; nothing was stored and the previous key stays`,
          {
            metadata: { category },
            fieldViolations: [{ field: 'api_key', description: refusal.message }],
          },
        );
      }
      const ciphertext = deps.keyring.encrypt(req.api_key, keyContext(ctx.tenant, b.id));
      return withTransaction(
        pool,
        async (tx) => {
          // The config's provider may have changed during the probe: checked again under the row's lock.
          const current = await configs.findConfig(tx, ctx.tenant, b.id, { lock: true });
          const late = providerConflict(b, current, provider);
          if (late) throw errors.invalidField('provider', late);
          const row = await configs.storeKey(tx, ctx.tenant, b.id, {
            provider,
            ciphertext,
            keyId: Keyring.keyIdOf(ciphertext),
            baseUrl,
          });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'agent_config.byok_key_set',
            resourceType: 'agent_config',
            resourceId: row.id,
            data: configData(row),
            metadata: { provider, key_version: row.byok_key_version, base_url: baseUrl },
          });
          return toConfig(row);
        },
        { signal: ctx.signal },
      );
    },

    async deleteByokKey(req, ctx) {
      const b = blueprintOf(req.blueprint);
      return withTransaction(
        pool,
        async (tx) => {
          const row = await configs.clearKey(tx, ctx.tenant, b.id);
          if (!row) throw errors.notFound('agent_config', b.id);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'agent_config.byok_key_removed',
            resourceType: 'agent_config',
            resourceId: row.id,
            data: configData(row),
            metadata: { base_url: null },
          });
          return toConfig(row);
        },
        { signal: ctx.signal },
      );
    },
  };
}

/** Why a key of `provider` cannot be stored for a config whose provider field says otherwise, if it cannot. */
function providerConflict(
  b: Blueprint,
  config: configs.ConfigRow | undefined,
  provider: ProviderName,
): string | undefined {
  if (!config?.provider || config.provider === provider) return undefined;
  return `the config runs ${config.provider} (its provider field), so its key must be a ${config.provider} key; send a ${config.provider} key, or first PUT /agent-configs/${b.id} without provider`;
}
