/**
 * JSON ↔ protobuf mapping of the contract (§1), over protobufjs reflection: the proto's
 * snake_case names, int64 as JSON numbers, Timestamp as RFC 3339, Struct/Value as raw JSON,
 * enums as lowercase names without their prefix, unknown fields rejected with their path.
 * Proto3 canonical JSON differs on most of these points, hence a mapping of our own.
 */
import protobuf from 'protobufjs';

export interface Violation {
  field: string;
  description: string;
}

/** Thrown with every violation of one request, so the client sees them all at once. */
export class MappingError extends Error {
  constructor(readonly violations: Violation[]) {
    super(violations.map((v) => `${v.field}: ${v.description}`).join('; '));
  }
}

const INT_TYPES = new Set([
  'int32',
  'sint32',
  'sfixed32',
  'uint32',
  'fixed32',
  'int64',
  'sint64',
  'sfixed64',
  'uint64',
  'fixed64',
]);
const UNSIGNED = new Set(['uint32', 'fixed32', 'uint64', 'fixed64']);
const RANGE32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };
const UINT32_MAX = 2 ** 32 - 1;
/** google.protobuf wrapper types ↔ their bare JSON value (null = not set). */
export const WRAPPERS: Record<string, string> = {
  '.google.protobuf.DoubleValue': 'double',
  '.google.protobuf.FloatValue': 'float',
  '.google.protobuf.Int64Value': 'int64',
  '.google.protobuf.UInt64Value': 'uint64',
  '.google.protobuf.Int32Value': 'int32',
  '.google.protobuf.UInt32Value': 'uint32',
  '.google.protobuf.BoolValue': 'bool',
  '.google.protobuf.StringValue': 'string',
  '.google.protobuf.BytesValue': 'bytes',
};
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

/** Fields with presence: proto3 `optional` and members of a oneof (null when not set). */
export function isOptional(field: protobuf.Field): boolean {
  return Boolean(field.options?.proto3_optional) || field.partOf !== null;
}

/** `MEMBER_ROLE_OWNER` of enum MemberRole ↔ `owner`. */
export function enumPrefix(e: protobuf.Enum): string {
  return e.name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase() + '_';
}

export function enumNames(e: protobuf.Enum): string[] {
  const prefix = enumPrefix(e);
  return Object.entries(e.values)
    .filter(([, v]) => v !== 0)
    .map(([k]) => (k.startsWith(prefix) ? k.slice(prefix.length) : k).toLowerCase());
}

function enumToJson(e: protobuf.Enum, value: number): string | null {
  if (value === 0) return null;
  const name = e.valuesById[value];
  if (name === undefined) return null;
  const prefix = enumPrefix(e);
  return (name.startsWith(prefix) ? name.slice(prefix.length) : name).toLowerCase();
}

function enumFromJson(e: protobuf.Enum, value: string): number | undefined {
  const key = enumPrefix(e) + value.toUpperCase();
  const n = e.values[key];
  return n === undefined || n === 0 || value !== value.toLowerCase() ? undefined : n;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

// ---------- JSON → protobufjs object ----------

/** Maps a JSON value onto a message type; collects violations under `path`. */
export function messageFromJson(
  type: protobuf.Type,
  json: unknown,
  path: string,
  out: Violation[],
): Record<string, unknown> | undefined {
  const wkt = wellKnownFromJson(type, json, path, out);
  if (wkt !== NOT_WKT) return wkt as Record<string, unknown> | undefined;
  if (typeOf(json) !== 'object') {
    out.push({ field: path || '(body)', description: `must be a JSON object, got ${typeOf(json)}` });
    return undefined;
  }
  const obj: Record<string, unknown> = {};
  const oneofs = new Map<string, string>();
  for (const [key, value] of Object.entries(json as Record<string, unknown>)) {
    // Own properties only: `constructor` or `__proto__` are not fields.
    const field = Object.prototype.hasOwnProperty.call(type.fields, key) ? type.fields[key] : undefined;
    const at = path ? `${path}.${key}` : key;
    if (!field) {
      out.push({ field: at, description: 'is not a field of this request; check the spelling (names are snake_case)' });
      continue;
    }
    if (value === null) continue; // null = not set
    const group = field.partOf && !field.options?.proto3_optional ? field.partOf.name : undefined;
    if (group) {
      const other = oneofs.get(group);
      if (other) {
        out.push({
          field: at,
          description: `cannot be set together with ${other}; give one of ${field.partOf!.oneof.join(', ')}`,
        });
        continue;
      }
      oneofs.set(group, key);
    }
    const mapped = fieldFromJson(field, value, at, out);
    if (mapped !== undefined) obj[key] = mapped;
  }
  return obj;
}

export function fieldFromJson(field: protobuf.Field, value: unknown, path: string, out: Violation[]): unknown {
  field.resolve();
  if (field instanceof protobuf.MapField || field.map) {
    if (typeOf(value) !== 'object') {
      out.push({ field: path, description: `must be a JSON object, got ${typeOf(value)}` });
      return undefined;
    }
    const keyType = (field as unknown as protobuf.MapField).keyType;
    const m: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const at = `${path}.${k}`;
      if (keyType === 'bool' ? k !== 'true' && k !== 'false' : keyType !== 'string' && !/^-?\d+$/.test(k)) {
        out.push({
          field: at,
          description: `is not a valid key: keys here are ${keyType === 'bool' ? 'true or false' : 'integers'}`,
        });
        continue;
      }
      m[k] = singleFromJson(field, v, at, out);
    }
    return m;
  }
  if (field.repeated) {
    if (!Array.isArray(value)) {
      out.push({ field: path, description: `must be an array, got ${typeOf(value)}` });
      return undefined;
    }
    return value.map((v, i) => singleFromJson(field, v, `${path}[${i}]`, out));
  }
  return singleFromJson(field, value, path, out);
}

function singleFromJson(field: protobuf.Field, value: unknown, path: string, out: Violation[]): unknown {
  const rt = field.resolvedType;
  if (rt instanceof protobuf.Type) return messageFromJson(rt, value, path, out);
  if (rt instanceof protobuf.Enum) {
    if (typeof value !== 'string') {
      out.push({ field: path, description: `must be one of ${enumNames(rt).join(', ')}` });
      return undefined;
    }
    const n = enumFromJson(rt, value);
    if (n === undefined)
      out.push({
        field: path,
        description: `must be one of ${enumNames(rt).join(', ')}; got ${JSON.stringify(value)}`,
      });
    return n;
  }
  return scalarFromJson(field.type, value, path, out);
}

export function scalarFromJson(type: string, value: unknown, path: string, out: Violation[]): unknown {
  if (type === 'string') {
    if (typeof value !== 'string') out.push({ field: path, description: `must be a string, got ${typeOf(value)}` });
    return typeof value === 'string' ? value : undefined;
  }
  if (type === 'bool') {
    if (typeof value !== 'boolean')
      out.push({ field: path, description: `must be true or false, got ${typeOf(value)}` });
    return typeof value === 'boolean' ? value : undefined;
  }
  if (type === 'double' || type === 'float') {
    if (typeof value !== 'number' || !Number.isFinite(value))
      out.push({ field: path, description: `must be a number, got ${typeOf(value)}` });
    return typeof value === 'number' ? value : undefined;
  }
  if (INT_TYPES.has(type)) {
    const is32 = type.endsWith('32');
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      out.push({
        field: path,
        description: `must be an integer, got ${typeof value === 'number' ? value : typeOf(value)}`,
      });
      return undefined;
    }
    const outOfRange = UNSIGNED.has(type)
      ? value < 0 || (is32 && value > UINT32_MAX)
      : is32 && (value < RANGE32.min || value > RANGE32.max);
    if (outOfRange || !Number.isSafeInteger(value)) {
      out.push({ field: path, description: 'is out of range' });
      return undefined;
    }
    return value;
  }
  if (type === 'bytes') {
    if (typeof value !== 'string') out.push({ field: path, description: 'must be a base64 string' });
    return typeof value === 'string' ? Buffer.from(value, 'base64') : undefined;
  }
  out.push({ field: path, description: `has an unsupported type ${type}` });
  return undefined;
}

const NOT_WKT = Symbol('not a well-known type');

function wellKnownFromJson(type: protobuf.Type, json: unknown, path: string, out: Violation[]): unknown {
  switch (type.fullName) {
    case '.google.protobuf.Timestamp':
      return timestampFromJson(json, path, out);
    case '.google.protobuf.Struct':
      if (typeOf(json) !== 'object') {
        out.push({ field: path, description: `must be a JSON object, got ${typeOf(json)}` });
        return undefined;
      }
      return structFromJson(json as Record<string, unknown>);
    case '.google.protobuf.Value':
      return valueFromJson(json);
    case '.google.protobuf.ListValue':
      if (!Array.isArray(json)) {
        out.push({ field: path, description: `must be an array, got ${typeOf(json)}` });
        return undefined;
      }
      return { values: json.map(valueFromJson) };
    default: {
      const scalar = WRAPPERS[type.fullName];
      if (!scalar) return NOT_WKT; // google.protobuf.Empty included: a plain message without fields
      const v = scalarFromJson(scalar, json, path, out);
      return v === undefined ? undefined : { value: v };
    }
  }
}

/**
 * A real calendar date in YYYY-MM-DD form (2026-02-30 is not). With parseRfc3339, the one place
 * the API's dates and timestamps are read (the gateway and every service).
 */
export function isIsoDate(text: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // Date.UTC would roll 31 February over to March; a real date survives the round trip unchanged.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC: it reads years 0–99 as 1900–1999
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** Seconds and nanos of an RFC 3339 string, or undefined for anything else (including 2026-02-31 and 24:00). */
export function parseRfc3339(text: string): { seconds: number; nanos: number } | undefined {
  const m = RFC3339.exec(text);
  if (!m || !isIsoDate(`${m[1]}-${m[2]}-${m[3]}`)) return undefined;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  let offsetMin = 0;
  const zone = m[9]!;
  if (zone !== 'Z' && zone !== 'z') {
    const [h, mi] = zone.slice(1).split(':').map(Number) as [number, number];
    if (h > 23 || mi > 59) return undefined;
    offsetMin = (zone.startsWith('-') ? -1 : 1) * (h * 60 + mi);
  }
  const local = new Date(0);
  local.setUTCFullYear(year, month - 1, day);
  // A leap second (:60) is read as :59, as most systems do.
  local.setUTCHours(hour, minute, Math.min(second, 59), 0);
  const seconds = Math.floor(local.getTime() / 1000) - offsetMin * 60;
  // google.protobuf.Timestamp's range: 0001-01-01 to 9999-12-31 (UTC).
  if (seconds < -62135596800 || seconds > 253402300799) return undefined;
  return { seconds, nanos: Number((m[8] ?? '').padEnd(9, '0')) };
}

/** An RFC 3339 timestamp as a Date (millisecond precision), or undefined: parseRfc3339 for code that works with Dates. */
export function parseTimestamp(text: string): Date | undefined {
  const ts = parseRfc3339(text);
  return ts && new Date(ts.seconds * 1000 + Math.floor(ts.nanos / 1_000_000));
}

function timestampFromJson(json: unknown, path: string, out: Violation[]): unknown {
  const ts = typeof json === 'string' ? parseRfc3339(json) : undefined;
  if (!ts) out.push({ field: path, description: 'must be an RFC 3339 timestamp like 2026-11-22T10:00:00Z' });
  return ts;
}

function structFromJson(obj: Record<string, unknown>): unknown {
  return { fields: Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, valueFromJson(v)])) };
}

// protobufjs's built-in well-known types name their fields in camelCase, whatever keepCase says.
function valueFromJson(v: unknown): unknown {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(valueFromJson) } };
  return { structValue: structFromJson(v as Record<string, unknown>) };
}

// ---------- protobufjs message → JSON ----------

function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (v && typeof v === 'object' && 'toNumber' in v) return (v as { toNumber(): number }).toNumber();
  return Number(v ?? 0);
}

/**
 * A decoded message as the API's JSON: every non-optional field present (defaults included),
 * unset optional and message fields as null, UNSPECIFIED enums as null.
 */
export function messageToJson(type: protobuf.Type, msg: Record<string, unknown> | null | undefined): unknown {
  const wkt = wellKnownToJson(type, msg);
  if (wkt !== NOT_WKT) return wkt;
  if (!msg) return null;
  const out: Record<string, unknown> = {};
  for (const field of type.fieldsArray) {
    field.resolve();
    const has = Object.prototype.hasOwnProperty.call(msg, field.name);
    const value = msg[field.name];
    if (field.map) {
      out[field.name] = Object.fromEntries(
        Object.entries((value as Record<string, unknown>) ?? {}).map(([k, v]) => [k, singleToJson(field, v)]),
      );
    } else if (field.repeated) {
      out[field.name] = ((value as unknown[]) ?? []).map((v) => singleToJson(field, v));
    } else if (isOptional(field) && !has) {
      out[field.name] = null;
    } else {
      out[field.name] = singleToJson(field, value);
    }
  }
  return out;
}

function singleToJson(field: protobuf.Field, value: unknown): unknown {
  const rt = field.resolvedType;
  if (rt instanceof protobuf.Type) return value == null ? null : messageToJson(rt, value as Record<string, unknown>);
  if (rt instanceof protobuf.Enum) return enumToJson(rt, num(value));
  if (INT_TYPES.has(field.type)) return num(value);
  if (field.type === 'bytes') return Buffer.from((value as Uint8Array) ?? []).toString('base64');
  if (value === undefined) return field.type === 'string' ? '' : field.type === 'bool' ? false : 0;
  return value;
}

function wellKnownToJson(type: protobuf.Type, msg: Record<string, unknown> | null | undefined): unknown {
  switch (type.fullName) {
    case '.google.protobuf.Timestamp':
      return msg ? timestampToJson(num(msg.seconds), num(msg.nanos)) : null;
    case '.google.protobuf.Struct':
      return msg ? structToJson(msg) : null;
    case '.google.protobuf.Value':
      return msg ? valueToJson(msg) : null;
    case '.google.protobuf.ListValue':
      return msg ? ((msg.values as Record<string, unknown>[]) ?? []).map(valueToJson) : null;
    case '.google.protobuf.Empty':
      return {};
    default: {
      const scalar = WRAPPERS[type.fullName];
      if (!scalar) return NOT_WKT;
      if (!msg) return null;
      const v = msg.value;
      return scalar === 'bytes'
        ? Buffer.from((v as Uint8Array) ?? []).toString('base64')
        : scalar === 'bool'
          ? Boolean(v)
          : scalar === 'string'
            ? (v ?? '')
            : num(v);
    }
  }
}

/** RFC 3339 UTC with microseconds, as the contract shows: 2026-11-22T10:00:00.123456Z. */
export function timestampToJson(seconds: number, nanos: number): string | null {
  const date = new Date(seconds * 1000);
  if (Number.isNaN(date.getTime()) || seconds < -62135596800 || seconds > 253402300799) return null; // outside Timestamp's range
  const base = date.toISOString().slice(0, 19);
  return `${base}.${String(Math.floor(Math.max(0, Math.min(nanos, 999_999_999)) / 1000)).padStart(6, '0')}Z`;
}

function structToJson(msg: Record<string, unknown>): Record<string, unknown> {
  const fields = (msg.fields as Record<string, Record<string, unknown>>) ?? {};
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, valueToJson(v)]));
}

function valueToJson(v: Record<string, unknown>): unknown {
  // Only the oneof member that was on the wire is an own property of a decoded Value.
  const own = (k: string) => Object.prototype.hasOwnProperty.call(v, k) && v[k] != null;
  if (own('structValue')) return structToJson(v.structValue as Record<string, unknown>);
  if (own('listValue')) return ((v.listValue as { values?: Record<string, unknown>[] }).values ?? []).map(valueToJson);
  if (own('stringValue')) return v.stringValue;
  if (own('numberValue')) return v.numberValue;
  if (own('boolValue')) return v.boolValue;
  return null;
}
