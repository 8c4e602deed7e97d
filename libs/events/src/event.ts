import { Event } from '@workauto/protos/workauto/events/v1/event.js';

/** The version of `data_json`'s shape: v1 = the resource as the REST API returns it (docs/events.md). */
export const DATA_SCHEMA = 'v1';

/** An event as consumers see it: data and metadata parsed from their JSON text. */
export interface ConsumedEvent extends Omit<Event, 'data_json' | 'metadata_json' | 'data' | 'metadata'> {
  /** The resource after the change (REST JSON, `data_schema`), undefined for a hard delete. */
  data: Record<string, unknown> | undefined;
  metadata: Record<string, unknown>;
}

/**
 * A Kafka message value as an event. JSON.parse has no practical depth limit and the protobuf
 * part is flat, so no size or depth of client data can make an event undecodable.
 */
export function decodeEvent(value: Uint8Array): ConsumedEvent {
  // Fields 7 and 8 (data, metadata as Structs) are deprecated and no longer read: no release since
  // 0.2.0 writes them, and the release before this one reads data_json/metadata_json too
  // (docs/events.md, Payload).
  // (Both are overwritten below, so the Struct values of an older event are dropped, not passed on.)
  const { data_json, metadata_json, ...rest } = Event.decode(value);
  if (!rest.id) throw new Error('event has no id');
  return {
    ...rest,
    data: data_json ? (JSON.parse(data_json) as Record<string, unknown>) : undefined,
    metadata: metadata_json ? (JSON.parse(metadata_json) as Record<string, unknown>) : {},
  };
}
