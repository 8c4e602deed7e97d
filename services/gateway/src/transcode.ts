/** HTTP request → gRPC request object (ts-proto's shape) for a route: path parameters, query parameters and the JSON body. */
import type { DescField, DescMessage } from '@bufbuild/protobuf';
import {
  enumFromJson,
  enumNames,
  fieldByName,
  fieldFromJson,
  hasRules,
  messageFromJson,
  optionOf,
  scalarFromJson,
  scalarName,
  setField,
  listNames,
  ruleViolations,
  WRAPPERS,
  type Violation,
} from '@workauto/protos';
import { FieldBehavior } from '@workauto/protos/google/api/field_behavior.js';
import { gatewayErrors } from './errors.js';
import { PUBLIC_BASE_URL_FIELD } from './public-url.js';
import type { Route } from './routes.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Plain decimal notation only: Number() would also take hex, binary and whitespace. */
const DECIMAL = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** The request's `google.protobuf.FieldMask update_mask`, when it has one (Update rpcs). */
export function updateMaskField(type: DescMessage): DescField | undefined {
  const field = fieldByName(type, 'update_mask');
  return field?.message?.typeName === 'google.protobuf.FieldMask' ? field : undefined;
}

/**
 * Request fields the gateway fills itself and never takes from the client (a string field of one
 * of these names): `public_base_url`, the origin of absolute URLs a response hands out. They are
 * not in the OpenAPI document.
 */
const GATEWAY_FIELDS: readonly string[] = [PUBLIC_BASE_URL_FIELD];

/** Values of the gateway's own fields for one request, computed only when the route's request has the field. */
export type GatewayFieldValues = Partial<Record<string, () => string>>;

export function isGatewayField(field: DescField): boolean {
  return GATEWAY_FIELDS.includes(field.name) && field.fieldKind === 'scalar' && scalarName(field.scalar) === 'string';
}

/** Whether a field can be a query parameter at all: a scalar, an enum, a Timestamp or a wrapper (or a list of them). */
function fitsQuery(field: DescField): boolean {
  if (field.fieldKind === 'map' || isGatewayField(field)) return false;
  return !field.message || field.message.typeName === 'google.protobuf.Timestamp' || !!WRAPPERS[field.message.typeName];
}

/** The query parameters a route takes, in field order (what its OpenAPI operation lists, and an unknown one's 400). */
export function queryParameters(route: Pick<Route, 'requestType' | 'params' | 'body'>): DescField[] {
  if (route.body === '*') return [];
  return route.requestType.desc.fields.filter(
    (f) => !route.params.includes(f.name) && f.name !== route.body && fitsQuery(f),
  );
}

/** What an unknown query parameter is told: the route's query parameters, or that it takes none. */
function unknownQueryDescription(route: Route): string {
  const names = queryParameters(route).map((f) => f.name);
  return names.length
    ? `is not a query parameter of ${route.method} ${route.template}; its query parameters are ${listNames(names)}`
    : `is not a query parameter of ${route.method} ${route.template}, which takes none`;
}

/**
 * `[(google.api.field_behavior) = REQUIRED]`: a request must carry the field. The one source of
 * what is required: the gateway refuses a request without it (requiredViolations) and the OpenAPI
 * document lists it in `required`.
 */
export function isRequiredField(field: DescField): boolean {
  return optionOf<FieldBehavior[]>(field, 'google.api.field_behavior')?.includes(FieldBehavior.REQUIRED) ?? false;
}

/**
 * The REQUIRED fields a JSON value of `type` leaves out (absent or null), at every level of the
 * messages it carries: `owner.email`, `stages[1].name`. Wrong types are messageFromJson's to report.
 */
function requiredViolations(type: DescMessage, value: unknown, path: string, skip: string[] = []): Violation[] {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return [];
  const given = value as Record<string, unknown>;
  const out: Violation[] = [];
  for (const f of type.fields) {
    if (skip.includes(f.name)) continue;
    const at = path ? `${path}.${f.name}` : f.name;
    const v = given[f.name];
    if (v === undefined || v === null) {
      if (isRequiredField(f)) out.push({ field: at, description: 'is required' });
      continue;
    }
    if (!f.message || f.message.typeName.startsWith('google.protobuf.')) continue;
    if (f.fieldKind === 'list' && Array.isArray(v))
      v.forEach((item, i) => out.push(...requiredViolations(f.message, item, `${at}[${i}]`)));
    else if (f.fieldKind === 'message') out.push(...requiredViolations(f.message, v, at));
  }
  return out;
}

/** A query or path value (always text) as the field's type. */
function fromText(field: DescField, text: string, path: string, out: Violation[]): unknown {
  if (field.enum) {
    const n = enumFromJson(field.enum, text);
    if (n === undefined) {
      out.push({
        field: path,
        description: `must be one of ${enumNames(field.enum).join(', ')}; got ${JSON.stringify(text)}`,
      });
    }
    return n;
  }
  if (field.message) {
    if (field.message.typeName === 'google.protobuf.Timestamp') return messageFromJson(field.message, text, path, out);
    const wrapped = WRAPPERS[field.message.typeName];
    if (wrapped) return scalarText(wrapped, text, path, out);
    out.push({ field: path, description: 'cannot be given in the URL' });
    return undefined;
  }
  return scalarText(scalarName(field.scalar), text, path, out);
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
 * The protos' field rules (`buf.validate`: lengths, ranges, formats; docs/api.md, Validation) on a
 * request whose shape was refused, so its one 400 names every invalid field. A request of the
 * right shape is checked by its service alone (libs/grpc withFieldRules), before anything runs
 * there, with the same violations and the same 400: each request's rules run once, not on both
 * sides. A field whose shape was refused (or a part of it) already has its violation; a body that
 * is no object at all has no fields to check.
 */
function fieldRuleViolations(route: Route, request: Record<string, unknown>, shape: Violation[]): Violation[] {
  const type = route.requestType;
  if (!hasRules(type.desc) || shape.some((v) => v.field === '(body)')) return [];
  let bytes: Uint8Array;
  try {
    bytes = type.encode(request);
  } catch {
    return []; // a value the mapping refused is left undefined inside a list: its violation says why
  }
  const refused = shape.map((v) => v.field);
  return ruleViolations(type.desc, bytes).filter(
    (v) => !refused.some((f) => v.field === f || v.field.startsWith(`${f}.`) || v.field.startsWith(`${f}[`)),
  );
}

/**
 * The request message (a ts-proto object; fields left out take their defaults) of one HTTP call. Throws one
 * INVALID_ARGUMENT listing every violation of the path, the query and the body.
 */
export function buildRequest(
  route: Route,
  params: Record<string, string>,
  query: Record<string, unknown>,
  body: unknown,
  gatewayValues: GatewayFieldValues = {},
): Record<string, unknown> {
  const out: Violation[] = [];
  const type = route.requestType.desc;
  let request: Record<string, unknown> = {};
  const hasBody =
    body !== undefined &&
    !(typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0);
  const gatewayFields = type.fields.filter(isGatewayField);
  const own = (field: string) => ({ field, description: 'is set by the gateway; leave it out' });

  if (route.body === '*') {
    // PATCH, and a PUT that updates only the fields it carries (PUT /events/{id}) when its request has an update_mask.
    const maskField = route.method === 'PATCH' || route.method === 'PUT' ? updateMaskField(type) : undefined;
    let given =
      body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
    if (maskField && given && Object.prototype.hasOwnProperty.call(given, maskField.name)) {
      out.push({
        field: maskField.name,
        description: "is made from the body's keys; leave it out (send null to clear a field)",
      });
    }
    if (given && gatewayFields.some((f) => Object.prototype.hasOwnProperty.call(given, f.name))) {
      given = { ...given };
      for (const f of gatewayFields) {
        if (!Object.prototype.hasOwnProperty.call(given, f.name)) continue;
        out.push(own(f.name));
        delete given[f.name];
      }
      body = given;
    }
    out.push(...requiredViolations(type, body ?? {}, '', [...route.params, ...gatewayFields.map((f) => f.name)]));
    // An unknown key's violation lists the fields a body may carry: not the path's, the mask or the gateway's own.
    const hidden = [...route.params, ...(maskField ? [maskField.name] : []), ...gatewayFields.map((f) => f.name)];
    request = messageFromJson(type, body ?? {}, '', out, hidden) ?? {};
    // AIP-134 with JSON merge-patch semantics: the body's keys are the fields to change, and a key
    // whose value is null clears its field (the service reads it from update_mask).
    if (maskField && given) request[maskField.name] = Object.keys(given); // ts-proto holds a FieldMask's paths
    // The path names the resource; a second, possibly different, value in the body is a mistake.
    for (const p of route.params) {
      if (body && typeof body === 'object' && Object.prototype.hasOwnProperty.call(body, p)) {
        out.push({ field: p, description: 'is given in the path; leave it out of the body' });
      }
    }
  } else if (route.body) {
    const field = fieldByName(type, route.body)!;
    if (body === undefined || body === null) {
      if (isRequiredField(field)) out.push({ field: route.body, description: 'is required' });
    } else if (field.message && field.fieldKind === 'message') {
      out.push(...requiredViolations(field.message, body, route.body));
    } else if (field.message && field.fieldKind === 'list' && Array.isArray(body)) {
      body.forEach((item, i) => out.push(...requiredViolations(field.message, item, `${route.body}[${i}]`)));
    }
    const mapped = body === undefined ? undefined : fieldFromJson(field, body, route.body, out);
    if (mapped !== undefined) setField(request, field, mapped);
  } else if (hasBody) {
    out.push({ field: '(body)', description: 'this endpoint takes no request body' });
  }

  for (const [name, text] of Object.entries(params)) {
    const field = fieldByName(type, name)!; // routes.ts checked every path variable is a field
    if ((name === 'id' || name.endsWith('_id')) && !UUID.test(text)) {
      out.push({ field: name, description: `must be a UUID, got ${JSON.stringify(text.slice(0, 64))}` });
      continue;
    }
    const v = fromText(field, text, name, out);
    if (v !== undefined) setField(request, field, v);
  }

  // A redirect route is a browser round trip whose URL a third party writes (an OAuth provider adds
  // scope, iss, session_state, …): there, parameters the request does not name are dropped, not refused.
  const dropUnknown = route.successStatus === 302;
  for (const [name, raw] of Object.entries(query)) {
    const field = fieldByName(type, name);
    if (field && isGatewayField(field)) {
      if (!dropUnknown) out.push(own(name));
      continue;
    }
    if (!field || name in params || name === route.body || route.body === '*' || field.fieldKind === 'map') {
      if (!dropUnknown) out.push({ field: name, description: unknownQueryDescription(route) });
      continue;
    }
    const values = Array.isArray(raw) ? raw.map(String) : [String(raw)];
    if (field.fieldKind === 'list') {
      setField(
        request,
        field,
        values.map((t, i) => fromText(field, t, `${name}[${i}]`, out)),
      );
    } else {
      if (values.length > 1) out.push({ field: name, description: 'is given more than once' });
      const v = fromText(field, values[0]!, name, out);
      if (v !== undefined) setField(request, field, v);
    }
  }

  // A REQUIRED query parameter (a list's window, say) left out.
  if (route.body !== '*') {
    for (const f of type.fields)
      if (
        isRequiredField(f) &&
        !isGatewayField(f) &&
        !(f.name in params) &&
        f.name !== route.body &&
        query[f.name] === undefined
      )
        out.push({ field: f.name, description: 'is required (a query parameter)' });
  }

  if (out.length) throw gatewayErrors.badRequest([...out, ...fieldRuleViolations(route, request, out)]);
  // Last, so a client's invalid request is its 400 whatever these would say.
  for (const f of gatewayFields) {
    const value = gatewayValues[f.name];
    if (value) setField(request, f, value());
  }
  return request;
}
