import type protobuf from 'protobufjs';
import { loadProtoRoot } from './index.js';
import { messageToJson } from './json-mapping.js';

declare const resourceJsonBrand: unique symbol;
/**
 * A resource in exactly the JSON shape the REST API returns for it (what `resourceJson` makes):
 * the only thing event data may be, so events and responses cannot drift apart.
 */
export type ResourceJson = Record<string, unknown> & { readonly [resourceJsonBrand]: true };

/** The ts-proto side of a message type (the generated `Note` const): its encoder. */
export interface MessageEncoder<T> {
  encode(message: T): { finish(): Uint8Array };
}

/**
 * The REST JSON of a service's resources from the same ts-proto objects its handlers return:
 * encoded to the bytes the service sends, decoded and mapped the way the gateway maps a response.
 * `protoFile` is relative to proto/, `pkg` its package (e.g. workauto.notes_tasks.v1).
 */
export function resourceJsonOf(
  protoFile: string,
  pkg: string,
): <T>(typeName: string, encoder: MessageEncoder<T>, message: T) => ResourceJson {
  let root: protobuf.Root | undefined; // loaded on first use: parsing .proto files is not free
  const types = new Map<string, protobuf.Type>();
  return (typeName, encoder, message) => {
    root ??= loadProtoRoot([protoFile]);
    let type = types.get(typeName);
    if (!type) types.set(typeName, (type = root.lookupType(`${pkg}.${typeName}`)));
    return messageToJson(
      type,
      type.decode(encoder.encode(message).finish()) as unknown as Record<string, unknown>,
    ) as ResourceJson;
  };
}
