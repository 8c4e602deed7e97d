/** HTTP request → gRPC request object for a route: path parameters, query parameters and the JSON body. */
import protobuf from 'protobufjs';
import {
  fieldFromJson,
  messageFromJson,
  scalarFromJson,
  enumNames,
  enumPrefix,
  WRAPPERS,
  type Violation,
} from '@workauto/protos';
import { gatewayErrors } from './errors.js';
import type { Route } from './routes.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Plain decimal notation only: Number() would also take hex, binary and whitespace. */
const DECIMAL = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** The request's `google.protobuf.FieldMask update_mask`, when it has one (Update rpcs). */
export function updateMaskField(type: protobuf.Type): protobuf.Field | undefined {
  const field = type.fields.update_mask;
  if (!field) return undefined;
  field.resolve();
  return field.resolvedType?.fullName === '.google.protobuf.FieldMask' ? field : undefined;
}

/** A query or path value (always text) as the field's type. */
function fromText(field: protobuf.Field, text: string, path: string, out: Violation[]): unknown {
  field.resolve();
  const rt = field.resolvedType;
  if (rt instanceof protobuf.Enum) {
    const key = enumPrefix(rt) + text.toUpperCase();
    const n = Object.prototype.hasOwnProperty.call(rt.values, key) ? rt.values[key] : undefined;
    if (n === undefined || n === 0 || text !== text.toLowerCase()) {
      out.push({ field: path, description: `must be one of ${enumNames(rt).join(', ')}; got ${JSON.stringify(text)}` });
      return undefined;
    }
    return n;
  }
  if (rt instanceof protobuf.Type) {
    if (rt.fullName === '.google.protobuf.Timestamp') return messageFromJson(rt, text, path, out);
    const wrapped = WRAPPERS[rt.fullName];
    if (wrapped) {
      const v = scalarText(wrapped, text, path, out);
      return v === undefined ? undefined : { value: v };
    }
    out.push({ field: path, description: 'cannot be given in the URL' });
    return undefined;
  }
  return scalarText(field.type, text, path, out);
}

function scalarText(type: string, text: string, path: string, out: Violation[]): unknown {
  switch (type) {
    case 'string':
      return text;
    case 'bool':
      if (text === 'true' || text === 'false') return text === 'true';
      out.push({ field: path, description: 'must be true or false' });
      return undefined;
    case 'double':
    case 'float':
      if (DECIMAL.test(text) && Number.isFinite(Number(text))) return Number(text);
      out.push({ field: path, description: 'must be a number' });
      return undefined;
    default:
      if (type === 'bytes') return scalarFromJson(type, text, path, out);
      if (/^-?\d+$/.test(text)) return scalarFromJson(type, Number(text), path, out);
      out.push({ field: path, description: `must be an integer, got ${JSON.stringify(text.slice(0, 40))}` });
      return undefined;
  }
}

/**
 * The request message (as a protobufjs plain object) of one HTTP call. Throws one
 * INVALID_ARGUMENT listing every violation of the path, the query and the body.
 */
export function buildRequest(
  route: Route,
  params: Record<string, string>,
  query: Record<string, unknown>,
  body: unknown,
): Record<string, unknown> {
  const out: Violation[] = [];
  const type = route.requestType;
  let request: Record<string, unknown> = {};
  const hasBody =
    body !== undefined &&
    !(typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0);

  if (route.body === '*') {
    // PATCH, and a PUT that updates only the fields it carries (PUT /events/{id}) when its request has an update_mask.
    const maskField = route.method === 'PATCH' || route.method === 'PUT' ? updateMaskField(type) : undefined;
    const given =
      body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
    if (maskField && given && Object.prototype.hasOwnProperty.call(given, maskField.name)) {
      out.push({
        field: maskField.name,
        description: "is made from the body's keys; leave it out (send null to clear a field)",
      });
    }
    request = messageFromJson(type, body ?? {}, '', out) ?? {};
    // AIP-134 with JSON merge-patch semantics: the body's keys are the fields to change, and a key
    // whose value is null clears its field (the service reads it from update_mask).
    if (maskField && given) request[maskField.name] = { paths: Object.keys(given) };
    // The path names the resource; a second, possibly different, value in the body is a mistake.
    for (const p of route.params) {
      if (body && typeof body === 'object' && Object.prototype.hasOwnProperty.call(body, p)) {
        out.push({ field: p, description: 'is given in the path; leave it out of the body' });
      }
    }
  } else if (route.body) {
    const field = type.fields[route.body]!;
    const mapped = body === undefined ? undefined : fieldFromJson(field, body, route.body, out);
    if (mapped !== undefined) request[route.body] = mapped;
  } else if (hasBody) {
    out.push({ field: '(body)', description: 'this endpoint takes no request body' });
  }

  for (const [name, text] of Object.entries(params)) {
    const field = type.fields[name]!; // routes.ts checked every path variable is a field
    if ((name === 'id' || name.endsWith('_id')) && !UUID.test(text)) {
      out.push({ field: name, description: `must be a UUID, got ${JSON.stringify(text.slice(0, 64))}` });
      continue;
    }
    const v = fromText(field, text, name, out);
    if (v !== undefined) request[name] = v;
  }

  // A redirect route is a browser round trip whose URL a third party writes (an OAuth provider adds
  // scope, iss, session_state, …): there, parameters the request does not name are dropped, not refused.
  const dropUnknown = route.successStatus === 302;
  for (const [name, raw] of Object.entries(query)) {
    const field = Object.prototype.hasOwnProperty.call(type.fields, name) ? type.fields[name] : undefined;
    if (!field || name in params || name === route.body || route.body === '*' || field.map) {
      if (!dropUnknown) out.push({ field: name, description: 'is not a query parameter of this endpoint' });
      continue;
    }
    const values = Array.isArray(raw) ? raw.map(String) : [String(raw)];
    if (field.repeated) {
      request[name] = values.map((t, i) => fromText(field, t, `${name}[${i}]`, out));
    } else {
      if (values.length > 1) out.push({ field: name, description: 'is given more than once' });
      const v = fromText(field, values[0]!, name, out);
      if (v !== undefined) request[name] = v;
    }
  }

  if (out.length) throw gatewayErrors.badRequest(out);
  return request;
}
