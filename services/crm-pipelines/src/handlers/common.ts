import type { Pool } from '@workauto/db';
import { enumMapping, type Handlers, type Validator } from '@workauto/grpc';
import { resourceJson } from '@workauto/protos';
import {
  ChannelType,
  DealStatus,
  StageType,
  Contact,
  ContactChannel,
  Deal,
  DealStageHistoryEntry,
  Pipeline,
  PipelineStage,
  type CrmPipelinesServiceService,
} from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { confidenceProblem, normalizeCurrency, toNumber } from '../domain/money.js';
import type { ChannelRow } from '../repo/channels.js';
import type { ContactRow } from '../repo/contacts.js';
import type { DealRow } from '../repo/deals.js';
import type { HistoryRow } from '../repo/history.js';
import type { PipelineRow } from '../repo/pipelines.js';
import type { StageRow } from '../repo/stages.js';

export const SOURCE = 'crm-pipelines';
export const stageTypes = enumMapping(StageType, 'STAGE_TYPE_');
export const dealStatuses = enumMapping(DealStatus, 'DEAL_STATUS_');
export const channelTypes = enumMapping(ChannelType, 'CHANNEL_TYPE_');

/** Field limits (docs/crm-pipelines.md). */
export const LIMITS = {
  stagesPerPipeline: 50,
  channelsPerContact: 50,
  /** GET /deals/{id}/history answers the last this many changes. */
  historyEntries: 1_000,
};

export interface CrmDeps {
  pool: Pool;
}

type H = Handlers<typeof CrmPipelinesServiceService>;
/** The handler of one rpc. */
export type Handler<K extends keyof H> = H[K];

export function toStage(row: StageRow): PipelineStage {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    pipeline_id: row.pipeline_id,
    name: row.name,
    stage_type: stageTypes.fromDomain(row.stage_type),
    display_order: row.display_order,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    default_confidence: toNumber(row.default_confidence),
  };
}

export function toPipeline(row: PipelineRow, stages: StageRow[]): Pipeline {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    display_order: row.display_order,
    is_default: row.is_default,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    description: row.description ?? undefined,
    deleted_at: row.deleted_at ?? undefined,
    stages: stages.map(toStage),
    currency: row.currency,
  };
}

export function toDeal(row: DealRow): Deal {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    pipeline_id: row.pipeline_id,
    stage_id: row.stage_id,
    title: row.title,
    amount: Number(row.amount),
    currency: row.currency,
    status: dealStatuses.fromDomain(row.status),
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    confidence: toNumber(row.confidence),
    contact_id: row.contact_id ?? undefined,
    owner_id: row.owner_id ?? undefined,
    expected_close_date: row.expected_close_date ?? undefined,
    deleted_at: row.deleted_at ?? undefined,
  };
}

export function toHistory(row: HistoryRow): DealStageHistoryEntry {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    deal_id: row.deal_id,
    changed_at: row.changed_at,
    to_stage_id: row.to_stage_id,
    to_stage_name: row.to_stage_name,
    from_stage_id: row.from_stage_id ?? undefined,
    from_stage_name: row.from_stage_name ?? undefined,
    amount_at_change: toNumber(row.amount_at_change),
    confidence_at_change: toNumber(row.confidence_at_change),
  };
}

export function toContact(row: ContactRow): Contact {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    company: row.company ?? undefined,
    job_title: row.job_title ?? undefined,
    deleted_at: row.deleted_at ?? undefined,
  };
}

export function toChannel(row: ChannelRow): ContactChannel {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    contact_id: row.contact_id,
    type: channelTypes.fromDomain(row.type),
    is_primary: row.is_primary,
    is_verified: row.is_verified,
    preference_order: row.preference_order,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    value: row.value,
    canonical_value: row.canonical_value,
    label: row.label ?? undefined,
    key_version: row.key_version,
  };
}

// Event data is the resource exactly as the REST API returns it (docs/events.md): the same
// message the handler returns, through the gateway's JSON mapping.
export const stageData = (row: StageRow) => resourceJson(PipelineStage, toStage(row));
export const pipelineData = (row: PipelineRow, stages: StageRow[]) => resourceJson(Pipeline, toPipeline(row, stages));
export const dealData = (row: DealRow) => resourceJson(Deal, toDeal(row));
export const historyData = (row: HistoryRow) => resourceJson(DealStageHistoryEntry, toHistory(row));
export const contactData = (row: ContactRow) => resourceJson(Contact, toContact(row));
export const channelData = (row: ChannelRow) => resourceJson(ContactChannel, toChannel(row));

/** Field checks shared by the handlers, added to one Validator so a request's problems come together. */
export function checkConfidence(v: Validator, field: string, value: number | undefined): Validator {
  if (value === undefined) return v;
  const problem = confidenceProblem(value);
  return problem ? v.add(field, problem) : v;
}

export function checkCurrency(v: Validator, field: string, value: string | undefined): Validator {
  return value === undefined || normalizeCurrency(value)
    ? v
    : v.add(field, 'must be an ISO 4217 currency code like USD or EUR');
}
