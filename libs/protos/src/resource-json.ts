import { messageToJson } from './json-mapping.js';
import { loadSchema, messageDesc } from './schema.js';

// Read when a service starts (≈ 0.1 s for the whole set), not on its first mutation's event loop.
const schema = loadSchema();

declare const resourceJsonBrand: unique symbol;
/**
 * A resource in exactly the JSON shape the REST API returns for it (what `resourceJson` makes):
 * the only thing event data may be, so events and responses cannot drift apart.
 */
export type ResourceJson = Record<string, unknown> & { readonly [resourceJsonBrand]: true };

/** The ts-proto side of a message type (the generated `Note` const): its full name and its message. */
export interface MessageCodec<T> {
  readonly $type: string;
  decode(input: Uint8Array): T;
}

/**
 * The REST JSON of a resource from the ts-proto object its handler returns, mapped by the
 * gateway's own mapping of a response (no encoding in between): e.g. `resourceJson(Note, toNote(row))`.
 */
export function resourceJson<T>(type: MessageCodec<T>, message: T): ResourceJson {
  return messageToJson(messageDesc(type.$type, schema), message) as ResourceJson;
}
