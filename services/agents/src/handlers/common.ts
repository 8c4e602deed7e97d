import type { Pool } from '@workauto/db';
import type { Keyring } from '@workauto/crypto';
import { reducedUrl, type EgressPolicy } from '@workauto/egress';
import { enumMapping, errors, type Handlers } from '@workauto/grpc';
import { resourceJson } from '@workauto/protos';
import {
  AgentBlueprint,
  AgentConfig,
  AgentRun,
  AgentRunStatus,
  AgentRunStep,
  StepType,
  ByokStatus,
  FailureCategory,
  ProbeCategory,
  Provider,
  type AgentsServiceService,
} from '@workauto/protos/workauto/agents/v1/agents.js';
import { findBlueprint, type Blueprint, type ProviderName } from '../domain/blueprints.js';
import { toCents } from '../domain/costs.js';
import type { Providers } from '../providers/index.js';
import type { ConfigRow } from '../repo/configs.js';
import type { RunRow, StepRow } from '../repo/runs.js';
import type { RunEventHub } from '../live/hub.js';
import type { ToolClients } from '../tools/clients.js';

export const SOURCE = 'agents';
export const providers = enumMapping(Provider, 'PROVIDER_');
const byokStatuses = enumMapping(ByokStatus, 'BYOK_STATUS_');
export const probeCategories = enumMapping(ProbeCategory, 'PROBE_CATEGORY_');
export const runStatuses = enumMapping(AgentRunStatus, 'AGENT_RUN_STATUS_');
const failureCategories = enumMapping(FailureCategory, 'FAILURE_CATEGORY_');
const stepTypes = enumMapping(StepType, 'STEP_TYPE_');

export interface AgentsDeps {
  pool: Pool;
  keyring: Keyring;
  providers: Providers;
  /** The policy a tenant's base_url is checked against when written (and called through). */
  egress: EgressPolicy;
  /** Live progress (run events): this process's LISTEN fan-out and the streams' timings. */
  live: { hub: RunEventHub; settings: RunEventSettings };
  /** The services MCP tool calls reach, each call signed as the caller (handlers/mcp-tools/). */
  tools: ToolClients;
  /** The time a schedule's next tick is counted from (the scheduler's clock). */
  now(): Date;
}

type H = Handlers<typeof AgentsServiceService>;
/** The handler of one rpc; each lives in handlers/<resource>/<verb>.ts and index.ts assembles them. */
export type Handler<K extends keyof H> = H[K];

/** How a run's live event stream (handlers/runs/stream-events.ts) paces itself. */
export interface RunEventSettings {
  /** A comment after this long without anything written (AGENT_EVENTS_HEARTBEAT_MS). */
  heartbeatMs: number;
  /** A stream ends after this long, with a comment; the client reconnects (AGENT_EVENTS_MAX_STREAM_MS). */
  maxStreamMs: number;
  /** The `retry:` the stream starts with: how long a client waits before it reconnects. */
  retryMs: number;
}

export const DEFAULT_RUN_EVENT_SETTINGS: RunEventSettings = {
  heartbeatMs: 15_000,
  maxStreamMs: 300_000,
  retryMs: 1_000,
};

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

/**
 * A config as the API shows it. `reduceUrls`: a caller below admin on agents sees base_url reduced
 * to scheme, host and port (paths and queries of such URLs may carry tokens), as app and webhook
 * URLs are.
 */
export function toConfig(row: ConfigRow, reduceUrls = false): AgentConfig {
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
    provider: row.provider ? providers.fromDomain(row.provider) : undefined,
    model: row.model ?? undefined,
    base_url: row.base_url === null ? undefined : reduceUrls ? reducedUrl(row.base_url) : row.base_url,
    input_price_cents_per_mtok: row.input_price_cents_per_mtok ?? undefined,
    output_price_cents_per_mtok: row.output_price_cents_per_mtok ?? undefined,
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

/** A step as the API shows it: exact cost in cents (the run's cost_usd_cents is the sum, rounded up). */
export function toStep(row: StepRow): AgentRunStep {
  return {
    index: row.step_index,
    type: stepTypes.fromDomain(row.type),
    started_at: row.started_at,
    ended_at: row.ended_at,
    tool_name: row.tool_name ?? undefined,
    arguments: row.arguments ?? undefined,
    result: row.result ?? undefined,
    is_error: row.is_error ?? undefined,
    input_tokens: row.input_tokens ?? undefined,
    output_tokens: row.output_tokens ?? undefined,
    cost_usd_cents: row.cost_micro_cents === null ? undefined : row.cost_micro_cents / 1_000_000,
  };
}

// Event data is the resource exactly as the REST API returns it (docs/events.md): never the key,
// whose ciphertext the config row does not even carry.
export const configData = (row: ConfigRow) => resourceJson(AgentConfig, toConfig(row));
export const runData = (row: RunRow) => resourceJson(AgentRun, toRun(row));
export const stepData = (row: StepRow) => resourceJson(AgentRunStep, toStep(row));

export type { ProviderName };
