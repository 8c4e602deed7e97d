/**
 * Which webhook events a caller sees, and how: an event belongs to the domain of its resource type
 * (the part of its type before the dot) and is shown only to callers with read there. A
 * webhook_event.retried carries the event it retried in its data (which may be a retried one
 * again), so it needs read on each of their domains. Below admin on webhooks (or apps, or agents), destination
 * URLs in payloads are reduced. Pure.
 */
import type { AccessLevel, Domain } from '@workauto/grpc';

/** Every resource type of the event catalogue (libs/events) and the domain whose read level shows its events. */
export const EVENT_DOMAINS: Readonly<Record<string, Domain>> = {
  tenant: 'members',
  member: 'members',
  invitation: 'members',
  access_policies: 'members',
  api_key: 'members',
  integration_key: 'integrations',
  note: 'notes',
  tag: 'notes',
  task: 'tasks',
  pipeline: 'crm',
  pipeline_stage: 'crm',
  deal: 'crm',
  contact: 'crm',
  contact_channel: 'crm',
  webhook_endpoint: 'webhooks',
  webhook_event: 'webhooks',
  app: 'apps',
  calendar: 'calendar',
  calendar_event: 'calendar',
  agent_config: 'agents',
  agent_run: 'agents',
  mcp_tool: 'agents',
};

/** The event type whose data is another webhook event, payload included. */
const RETRIED = 'webhook_event.retried';

export const resourceTypeOf = (eventType: string): string => eventType.split('.')[0]!;

interface Levels {
  allows(domain: Domain, need: AccessLevel): boolean;
}

/**
 * The resource types whose events the caller may read, or undefined when it may read every domain
 * of the catalogue (no filter: owners, admins, callers without signed levels).
 */
export function readableResourceTypes(ctx: Levels): string[] | undefined {
  const all = Object.keys(EVENT_DOMAINS);
  const readable = all.filter((type) => ctx.allows(EVENT_DOMAINS[type]!, 'read'));
  return readable.length === all.length ? undefined : readable;
}

/** Which URL fields of event data the caller sees reduced. */
export interface UrlView {
  /** `url` of webhook_endpoint.* data (below admin on webhooks). */
  endpoints: boolean;
  /** `mcp_server_url` of app.* data (below admin on apps). */
  apps: boolean;
  /** `base_url` of agent_config.* data (below admin on agents), as the agents API shows it. */
  agents: boolean;
}

export function urlView(ctx: Levels): UrlView {
  return {
    endpoints: !ctx.allows('webhooks', 'admin'),
    apps: !ctx.allows('apps', 'admin'),
    agents: !ctx.allows('agents', 'admin'),
  };
}

/** The URL field of each resource type's event data that may carry a token, by the view's switch. */
const URL_FIELDS: readonly { prefix: string; field: string; view: keyof UrlView }[] = [
  { prefix: 'webhook_endpoint.', field: 'url', view: 'endpoints' },
  { prefix: 'app.', field: 'mcp_server_url', view: 'apps' },
  { prefix: 'agent_config.', field: 'base_url', view: 'agents' },
];

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A webhook body ({type, timestamp, data}) with the URLs the view hides reduced, in retried events too. */
export function reducePayloadUrls(payload: Json, view: UrlView, reduce: (url: string) => string): Json {
  const { type, data } = payload;
  if (!isObject(data) || typeof type !== 'string') return payload;
  const field = URL_FIELDS.find((f) => view[f.view] && type.startsWith(f.prefix))?.field;
  if (field !== undefined && typeof data[field] === 'string')
    return { ...payload, data: { ...data, [field]: reduce(data[field]) } };
  if (type === RETRIED && isObject(data.payload))
    return { ...payload, data: { ...data, payload: reducePayloadUrls(data.payload, view, reduce) } };
  return payload;
}
