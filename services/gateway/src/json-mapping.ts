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

const INT_TYPES = new Set(['int32', 'sint32', 'sfixed32', 'uint32', 'fixed32', 'int64', 'sint64', 'sfixed64', 'uint64', 'fixed64']);
const UNSIGNED = new Set(['uint32', 'fixed32', 'uint64', 'fixed64']);
const RANGE32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

export function isOptional(field: protobuf.Field): boolean {
  return Boolean(field.options?.proto3_optional);
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
export function messageFromJson(type: protobuf.Type, json: unknown, path: string, out: Violation[]): Record<string, unknown> | undefined {
  const wkt = wellKnownFromJson(type, json, path, out);
  if (wkt !== NOT_WKT) return wkt as Record<string, unknown> | undefined;
  if (typeOf(json) !== 'object') {
    out.push({ field: path || '(body)', description: `must be a JSON object, got ${typeOf(json)}` });
    return undefined;
  }
  const obj: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json as Record<string, unknown>)) {
    const field = type.fields[key];
    const at = path ? `${path}.${key}` : key;
    if (!field) {
      out.push({ field: at, description: 'is not a field of this request; check the spelling (names are snake_case)' });
      continue;
    }
    if (value === null) continue; // null = not set
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
    const m: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) m[k] = singleFromJson(field, v, `${path}.${k}`, out);
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
    if (n === undefined) out.push({ field: path, description: `must be one of ${enumNames(rt).join(', ')}; got ${JSON.stringify(value)}` });
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
    if (typeof value !== 'boolean') out.push({ field: path, description: `must be true or false, got ${typeOf(value)}` });
    return typeof value === 'boolean' ? value : undefined;
  }
  if (type === 'double' || type === 'float') {
    if (typeof value !== 'number' || !Number.isFinite(value)) out.push({ field: path, description: `must be a number, got ${typeOf(value)}` });
    return typeof value === 'number' ? value : undefined;
  }
  if (INT_TYPES.has(type)) {
    const is32 = type.endsWith('32');
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      out.push({ field: path, description: `must be an integer, got ${typeof value === 'number' ? value : typeOf(value)}` });
      return undefined;
    }
    if ((UNSIGNED.has(type) && value < 0) || (is32 && (value < RANGE32.min || value > RANGE32.max)) || !Number.isSafeInteger(value)) {
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
    case '.google.protobuf.Empty':
      return {};
    default:
      return NOT_WKT;
  }
}

function timestampFromJson(json: unknown, path: string, out: Violation[]): unknown {
  const m = typeof json === 'string' ? RFC3339.exec(json) : null;
  const ms = m ? Date.parse(json as string) : NaN;
  if (!m || Number.isNaN(ms)) {
    out.push({ field: path, description: 'must be an RFC 3339 timestamp like 2026-11-22T10:00:00Z' });
    return undefined;
  }
  const nanos = Number((m[8] ?? '').padEnd(9, '0'));
  return { seconds: Math.floor(ms / 1000), nanos };
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
      out[field.name] = Object.fromEntries(Object.entries((value as Record<string, unknown>) ?? {}).map(([k, v]) => [k, singleToJson(field, v)]));
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
    default:
      return NOT_WKT;
  }
}

/** RFC 3339 UTC with microseconds, as the contract shows: 2026-11-22T10:00:00.123456Z. */
export function timestampToJson(seconds: number, nanos: number): string {
  const base = new Date(seconds * 1000).toISOString().slice(0, 19);
  return `${base}.${String(Math.floor(nanos / 1000)).padStart(6, '0')}Z`;
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
