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
      return 8 + utf8LengthBound(value);
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
        size += 24 + utf8LengthBound(key) + encodedSizeBound(item);
      }
      return size;
    }
    default:
      return 0;
  }
}

/** Below this many UTF-16 code units a string's UTF-8 length is bounded, not counted. */
const COUNTED_FROM = 256;

/**
 * A string's UTF-8 length, or for a short one three bytes per UTF-16 code unit, which no string
 * exceeds (a surrogate pair is two units and four bytes). Counting is a call into C++ per string
 * and key: 16 µs for a page of 20 tasks, against 3.5 µs with the bound (a loop). A looser bound
 * only ends a page sooner when its items' short strings come near the page's 3 MiB budget.
 */
function utf8LengthBound(text: string): number {
  return text.length < COUNTED_FROM ? 3 * text.length : Buffer.byteLength(text);
}
