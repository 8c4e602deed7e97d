import type { PoolClient } from '@workauto/db';
import { EVENT_TYPES } from '@workauto/events';
import { errors, type CallContext, type Validator } from '@workauto/grpc';
import { channelRefusal, eventTypeRefusal } from '../../domain/filters.js';
import * as endpoints from '../../repo/endpoints.js';

/** event_types / channels: each entry checked (the violation names its index), duplicates dropped; their number is the proto's rule. */
export function checkFilter(v: Validator, field: 'event_types' | 'channels', values: readonly string[]): string[] {
  values.forEach((value, i) => {
    const why = field === 'event_types' ? eventTypeRefusal(value, EVENT_TYPES) : channelRefusal(value);
    if (why) v.add(`${field}[${i}]`, why);
  });
  return [...new Set(values)];
}

/** Callers below admin on webhooks see endpoint URLs reduced: paths and queries often carry tokens. */
export const fullUrl = (ctx: CallContext) => ctx.allows('webhooks', 'admin');

export async function lockEndpoint(tx: PoolClient, tenantId: string, id: string): Promise<endpoints.EndpointRow> {
  const row = await endpoints.findEndpoint(tx, tenantId, id, { forUpdate: true });
  if (!row) throw errors.notFound('webhook_endpoint', id);
  return row;
}
