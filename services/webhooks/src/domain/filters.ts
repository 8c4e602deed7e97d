/** Which events an endpoint receives (docs/webhooks.md "Filters and channels"). Pure. */
import type { EventType } from '@workauto/events';

/** A channel's length (an endpoint's filters hold at most 100 entries: the proto's rule). */
const CHANNEL_MAX_LENGTH = 200;

export interface Filters {
  event_types: readonly string[];
  channels: readonly string[];
}

/** Both filters must match; an empty filter matches everything. */
export function matches(filters: Filters, event: { type: string; channels: readonly string[] }): boolean {
  const typeOk =
    filters.event_types.length === 0 ||
    filters.event_types.some((t) => t === event.type || (t.endsWith('.*') && event.type.startsWith(t.slice(0, -1))));
  const channelOk = filters.channels.length === 0 || filters.channels.some((c) => event.channels.includes(c));
  return typeOk && channelOk;
}

/** Why an event_types entry is refused, or null: a catalogue name or `<resource_type>.*` of a catalogued resource type. */
export function eventTypeRefusal(name: string, catalogue: readonly EventType[]): string | null {
  if (catalogue.some((t) => t.name === name)) return null;
  if (name.endsWith('.*')) {
    const resource = name.slice(0, -2);
    if (catalogue.some((t) => t.name.startsWith(`${resource}.`))) return null;
    return `${name} names no resource type of GET /webhook-event-types (e.g. note.*)`;
  }
  return `${name} is not an event type; use a name from GET /webhook-event-types or <resource_type>.*`;
}

/** A channel is a resource type (`deal`) or `<type>:<id>` (`pipeline:0193…`). */
export function channelRefusal(channel: string): string | null {
  if (channel.length > CHANNEL_MAX_LENGTH) return `must be at most ${CHANNEL_MAX_LENGTH} characters`;
  return /^[a-z][a-z0-9_]*(:[A-Za-z0-9_-]+)?$/.test(channel)
    ? null
    : `${JSON.stringify(channel)} is not a channel; use a resource type (deal) or <type>:<id> (pipeline:<uuid>)`;
}
