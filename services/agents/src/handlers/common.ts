import type { Pool } from '@workauto/db';
import type { Keyring } from '@workauto/crypto';
import { enumMapping, errors } from '@workauto/grpc';
import { resourceJson } from '@workauto/protos';
import {
  AgentBlueprint,
  AgentConfig,
  AgentRun,
  AgentRunStatus,
  ByokStatus,
  FailureCategory,
  ProbeCategory,
  ProbeStatus,
  Provider,
} from '@workauto/protos/workauto/agents/v1/agents.js';
import { findBlueprint, type Blueprint, type ProviderName } from '../domain/blueprints.js';
import { toCents } from '../domain/costs.js';
import type { Providers } from '../providers/index.js';
import type { ConfigRow } from '../repo/configs.js';
import type { RunRow } from '../repo/runs.js';

export const SOURCE = 'agents';
export const providers = enumMapping(Provider, 'PROVIDER_');
export const byokStatuses = enumMapping(ByokStatus, 'BYOK_STATUS_');
export const probeStatuses = enumMapping(ProbeStatus, 'PROBE_STATUS_');
export const probeCategories = enumMapping(ProbeCategory, 'PROBE_CATEGORY_');
export const runStatuses = enumMapping(AgentRunStatus, 'AGENT_RUN_STATUS_');
export const failureCategories = enumMapping(FailureCategory, 'FAILURE_CATEGORY_');

export interface AgentsDeps {
  pool: Pool;
  keyring: Keyring;
  providers: Providers;
}

/** AAD of a stored provider key: a ciphertext copied to another tenant or blueprint does not decrypt. */
export const keyContext = (tenantId: string, blueprint: string) => `agent_byok_key:${tenantId}:${blueprint}`;

/** The blueprint a path names; an unknown one is a 404. */
export function blueprintOf(id: string): Blueprint {
  const b = findBlueprint(id);
  if (!b) throw errors.notFound('agent_blueprint', id);
  return b;
}

export function toBlueprint(b: Blueprint): AgentBlueprint {
  return { id: b.id, name: b.name, description: b.description, models: { ...b.models }, tools: [...b.tools] };
}

export function toConfig(row: ConfigRow): AgentConfig {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    agent_blueprint: row.agent_blueprint,
    byok_status: byokStatuses.fromDomain(row.byok_status),
    guardrails: row.guardrails,
    created_at: row.created_at,
    updated_at: row.updated_at,
    budget_default_cents: row.budget_default_cents ?? undefined,
    byok_last_probed_at: row.byok_last_probed_at ?? undefined,
    byok_status_reason: row.byok_status_reason ?? undefined,
    deadline_default_seconds: row.deadline_default_seconds ?? undefined,
    schedule: row.schedule ?? undefined,
  };
}

export function toRun(row: RunRow): AgentRun {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    agent_blueprint: row.agent_blueprint,
    status: runStatuses.fromDomain(row.status),
    consecutive_failures: row.consecutive_failures,
    cost_usd_cents: toCents(row.cost_micro_cents),
    platform_fee_cents: row.platform_fee_cents,
    input: row.input ?? undefined,
    run_at: row.run_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
    budget_usd_cents: row.budget_usd_cents ?? undefined,
    deadline_at: row.deadline_at ?? undefined,
    failure_category: row.failure_category
      ? failureCategories.fromDomain(row.failure_category)
      : FailureCategory.FAILURE_CATEGORY_UNSPECIFIED,
    failure_detail: row.failure_detail ?? undefined,
    output: row.output ?? undefined,
  };
}

// Event data is the resource exactly as the REST API returns it (docs/events.md): never the key,
// whose ciphertext the config row does not even carry.
export const configData = (row: ConfigRow) => resourceJson(AgentConfig, toConfig(row));
export const runData = (row: RunRow) => resourceJson(AgentRun, toRun(row));

export type { ProviderName };
