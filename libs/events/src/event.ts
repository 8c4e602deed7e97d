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
  // data and metadata (Structs) are set only by events recorded before data_json/metadata_json: read
  // (deprecated) until no such event can still be in a topic (docs/events.md).
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  const { data_json, metadata_json, data, metadata, ...rest } = Event.decode(value);
  if (!rest.id) throw new Error('event has no id');
  return {
    ...rest,
    data: data_json ? (JSON.parse(data_json) as Record<string, unknown>) : data,
    metadata: metadata_json ? (JSON.parse(metadata_json) as Record<string, unknown>) : (metadata ?? {}),
  };
}
