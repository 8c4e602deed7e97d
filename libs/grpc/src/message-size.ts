/**
 * An upper bound of a message's protobuf encoding, computed from the ts-proto object a handler
 * returns (so a list needs no codec to know what its page costs on the wire): every string's and
 * byte array's length in bytes, plus a fixed allowance per value that covers its tag, its length
 * prefix and a fixed-width or varint number — and, for objects, the key text and the map-entry and
 * `google.protobuf.Value` framing a Struct adds. Never below the real size; for plain messages a
 * few dozen bytes per field above it.
 */
export function encodedSizeBound(value: unknown): number {
  switch (typeof value) {
    case 'undefined':
      return 0;
    case 'boolean':
      return 4;
    case 'number':
    case 'bigint':
      return 16;
    case 'string':
      return 8 + Buffer.byteLength(value);
    case 'object': {
      if (value === null) return 4;
      if (value instanceof Date) return 24; // Timestamp: seconds and nanos
      if (value instanceof Uint8Array) return 8 + value.byteLength;
      if (Array.isArray(value)) {
        let size = 8;
        for (const item of value) size += 8 + encodedSizeBound(item);
        return size;
      }
      let size = 8;
      // for…in, not Object.entries: no pair array per field (a ts-proto object has no inherited keys).
      for (const key in value) {
        const item = (value as Record<string, unknown>)[key];
        if (item === undefined) continue;
        size += 24 + Buffer.byteLength(key) + encodedSizeBound(item);
      }
      return size;
    }
    default:
      return 0;
  }
}
