import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PoolClient } from '@workauto/db';
import { newId, preparedStatement } from '@workauto/db';
import { context, propagation } from '@opentelemetry/api';
import type { ResourceJson } from '@workauto/protos';
import { Event } from '@workauto/protos/workauto/events/v1/event.js';
import { DATA_SCHEMA } from './event.js';

/** Migrations every service runs before its own: the outbox table. */
export const OUTBOX_MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), '..', 'migrations');

/** Who did it and from where: what a service's CallContext knows (structurally, to keep libs/events free of gRPC). */
export interface EventContext {
  tenantId: string | undefined;
  requestId: string;
  /** memberId: the member who acted (itself, or the holder of the API key that is the actor). */
  actor?: { type: string; id: string; memberId?: string | undefined } | undefined;
  clientIp?: string | undefined;
  userAgent?: string | undefined;
}

export interface EventInput {
  /** `<resource_type>.<verb>`, one of the types in docs/events.md. */
  type: string;
  resourceType: string;
  resourceId: string;
  /**
   * The resource's parent, when it has one (deal → pipeline, contact_channel → contact, subtask →
   * task): the event's channels are [resourceType, `<parent.type>:<parent.id>`] (docs/webhooks.md "Filters and channels").
   */
  parent?: { type: string; id: string } | undefined;
  /** Overrides the context's tenant (platform bootstrap creates a tenant it is not part of). */
  tenantId?: string;
  /**
   * The resource after the change in exactly the JSON the REST API returns for it: made by
   * `resourceJson` (@workauto/protos) from the same ts-proto message its handler returns. Must not
   * hold secrets. Absent for a hard delete.
   */
  data?: ResourceJson;
  /** For the audit entry: the changed fields and their new values. Must not hold secrets. */
  metadata?: Record<string, unknown>;
}

/** The channels an event is published on: its resource type, and its parent as `<type>:<id>`. */
export function eventChannels(input: Pick<EventInput, 'resourceType' | 'parent'>): string[] {
  return input.parent ? [input.resourceType, `${input.parent.type}:${input.parent.id}`] : [input.resourceType];
}

/**
 * Every change's event row, and the NOTIFY that wakes the relay when the transaction commits
 * (NOTIFY is delivered on commit only): one statement, prepared once per connection.
 */
const INSERT_OUTBOX = preparedStatement(
  'outbox_insert',
  `WITH row AS (INSERT INTO outbox (id, tenant_id, event_type, resource_type, resource_id, payload, headers)
                VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING 1)
   SELECT pg_notify('outbox', $8) FROM row`,
);

/**
 * The one call a mutation makes to record what happened: it writes the event to the outbox in
 * the caller's transaction, so the change and its audit and domain events commit (or roll back)
 * together. The relay publishes it afterwards.
 */
export async function recordEvent(
  tx: PoolClient,
  source: string,
  ctx: EventContext,
  input: EventInput,
): Promise<string> {
  const tenantId = input.tenantId ?? ctx.tenantId;
  if (!tenantId) throw new Error(`event ${input.type} has no tenant`);
  const id = newId();
  const event = Event.encode({
    id,
    type: input.type,
    tenant_id: tenantId,
    occurred_at: new Date(),
    actor: ctx.actor
      ? { type: ctx.actor.type, id: ctx.actor.id, member_id: ctx.actor.memberId ?? '' }
      : { type: 'system', id: 'system', member_id: '' },
    resource: { type: input.resourceType, id: input.resourceId },
    // JSON text, not google.protobuf.Struct: a Struct nests three messages per JSON level and a
    // deep client `metadata` would exceed the protobuf decoder's recursion limit (docs/events.md).
    data_json: input.data === undefined ? '' : JSON.stringify(input.data),
    data_schema: DATA_SCHEMA,
    // Dates become RFC 3339 strings (Date.toJSON).
    metadata_json: JSON.stringify(input.metadata ?? {}),
    request: { request_id: ctx.requestId, ip_address: ctx.clientIp ?? '', user_agent: ctx.userAgent ?? '' },
    source,
    channels: eventChannels(input),
  }).finish();
  // The request's trace context travels with the event (W3C traceparent in the Kafka headers).
  const trace: Record<string, string> = {};
  propagation.inject(context.active(), trace);
  await tx.query(
    INSERT_OUTBOX([id, tenantId, input.type, input.resourceType, input.resourceId, Buffer.from(event), trace, source]),
  );
  return id;
}
