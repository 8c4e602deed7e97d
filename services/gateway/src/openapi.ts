/**
 * An OpenAPI 3.1 document from the route table and the proto messages, with the JSON mapping's
 * rules. Requests and responses get separate schemas because the mapping treats them differently:
 * a response always carries every field (null when unset), a request may leave out all but the
 * REQUIRED ones and is refused with any other field.
 */
import protobuf from 'protobufjs';
import { updateMaskField } from './transcode.js';
import { WRAPPERS, enumNames, isOptional } from '@workauto/protos';
import type { Route } from './routes.js';

type Schema = Record<string, unknown>;
type Direction = 'input' | 'output';

const SCALARS: Record<string, Schema> = {
  string: { type: 'string' },
  bool: { type: 'boolean' },
  double: { type: 'number' },
  float: { type: 'number' },
  int32: { type: 'integer', format: 'int32' },
  sint32: { type: 'integer', format: 'int32' },
  sfixed32: { type: 'integer', format: 'int32' },
  uint32: { type: 'integer', minimum: 0, maximum: 4294967295 },
  fixed32: { type: 'integer', minimum: 0, maximum: 4294967295 },
  int64: { type: 'integer', format: 'int64' },
  sint64: { type: 'integer', format: 'int64' },
  sfixed64: { type: 'integer', format: 'int64' },
  uint64: { type: 'integer', minimum: 0 },
  fixed64: { type: 'integer', minimum: 0 },
  bytes: { type: 'string', contentEncoding: 'base64' },
};

const UUID_SCHEMA: Schema = { type: 'string', format: 'uuid' };

/**
 * Any JSON value, recursively (metadata and other Struct/Value fields), so that clients and fuzzers
 * see that values nest; the gateway refuses requests nested deeper than 32 levels (contract §1).
 */
const JSON_VALUE_REF: Schema = { $ref: '#/components/schemas/JsonValue' };
const JSON_VALUE_SCHEMA: Schema = {
  description: 'any JSON value; a request body nests at most 32 levels',
  anyOf: [
    { type: 'null' },
    { type: 'boolean' },
    { type: 'number' },
    { type: 'string' },
    { type: 'array', items: JSON_VALUE_REF },
    { type: 'object', additionalProperties: JSON_VALUE_REF },
  ],
};

/**
 * `*_id` names that are not UUIDs (contract §4 and the spec): a client's own identifier of a task
 * synced from elsewhere, an actor that may be `system` or `platform`, a client-chosen request id.
 * Every other string field named `id` or `*_id` is a UUID. A new non-UUID id goes on this list.
 */
export const NON_UUID_ID_FIELDS = new Set(['external_id', 'actor_id', 'request_id']);

function isUuidField(name: string): boolean {
  return (name === 'id' || name.endsWith('_id')) && !NON_UUID_ID_FIELDS.has(name);
}

const ERROR_SCHEMA: Schema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'status', 'message', 'details', 'request_id'],
      properties: {
        code: { type: 'integer', description: 'The HTTP status.' },
        status: { type: 'string', description: 'The gRPC status name, e.g. INVALID_ARGUMENT.' },
        message: { type: 'string' },
        details: {
          type: 'array',
          items: {
            oneOf: [
              {
                type: 'object',
                required: ['@type', 'reason', 'domain', 'metadata'],
                properties: {
                  '@type': { const: 'type.googleapis.com/google.rpc.ErrorInfo' },
                  reason: { type: 'string' },
                  domain: { type: 'string' },
                  metadata: { type: 'object', additionalProperties: { type: 'string' } },
                },
              },
              {
                type: 'object',
                required: ['@type', 'field_violations'],
                properties: {
                  '@type': { const: 'type.googleapis.com/google.rpc.BadRequest' },
                  field_violations: {
                    type: 'array',
                    items: {
                      type: 'object',
                      required: ['field', 'description'],
                      properties: { field: { type: 'string' }, description: { type: 'string' } },
                    },
                  },
                },
              },
            ],
          },
        },
        request_id: { type: 'string' },
      },
    },
  },
};

const nullable = (s: Schema): Schema => ({ anyOf: [s, { type: 'null' }] });

export function buildOpenApi(routes: Route[]): Record<string, unknown> {
  const schemas: Record<string, Schema> = { Error: ERROR_SCHEMA, JsonValue: JSON_VALUE_SCHEMA };
  /** Body schema name → the path variables it leaves out (one message can back several bodies). */
  const bodyVariants = new Map<string, string>();

  /** A message as a schema: a $ref to a named component, or inline for the well-known types. */
  const messageRef = (type: protobuf.Type, dir: Direction, exclude: string[] = []): Schema => {
    switch (type.fullName) {
      case '.google.protobuf.Timestamp':
        return { type: 'string', format: 'date-time' };
      case '.google.protobuf.Struct':
        return { type: 'object', additionalProperties: JSON_VALUE_REF };
      case '.google.protobuf.Value':
        return { ...JSON_VALUE_REF };
      case '.google.protobuf.ListValue':
        return { type: 'array', items: JSON_VALUE_REF };
    }
    const wrapped = WRAPPERS[type.fullName];
    if (wrapped) return { ...SCALARS[wrapped] };
    // '-' never occurs in a proto name, so a request variant cannot collide with a message (AccessPolicyInput).
    const base = type.fullName.slice(1).replace(/^workauto\./, '');
    let name = dir === 'output' ? base : exclude.length ? `${base}-Body` : `${base}-Request`;
    const variant = exclude.join(',');
    if (bodyVariants.has(name) && bodyVariants.get(name) !== variant) name = `${name}-without-${exclude.join('-')}`;
    if (exclude.length) bodyVariants.set(name, variant);
    if (!schemas[name]) {
      schemas[name] = {}; // placeholder against recursive messages
      schemas[name] = messageSchema(type, dir, exclude);
    }
    return { $ref: `#/components/schemas/${name}` };
  };

  const fieldSchema = (field: protobuf.Field, dir: Direction): Schema => {
    field.resolve();
    const rt = field.resolvedType;
    let s: Schema =
      rt instanceof protobuf.Type
        ? messageRef(rt, dir)
        : rt instanceof protobuf.Enum
          ? { type: 'string', enum: enumNames(rt) }
          : field.type === 'string' && isUuidField(field.name)
            ? { ...UUID_SCHEMA }
            : { ...SCALARS[field.type] };
    if (field.map) return { type: 'object', additionalProperties: s };
    if (field.repeated) return { type: 'array', items: s };
    // Null means "not set": for optional fields, messages and enums (whose UNSPECIFIED value is null).
    const canBeNull = isOptional(field) || rt instanceof protobuf.Type || rt instanceof protobuf.Enum;
    if (canBeNull && rt?.fullName !== '.google.protobuf.Value') s = nullable(s);
    // In a request, null is accepted for any field: left out, except in a PATCH, where it clears the field.
    else if (dir === 'input' && rt?.fullName !== '.google.protobuf.Value') s = nullable(s);
    return s;
  };

  const messageSchema = (type: protobuf.Type, dir: Direction, exclude: string[]): Schema => {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    const mask = dir === 'input' ? updateMaskField(type) : undefined;
    for (const f of type.fieldsArray) {
      if (exclude.includes(f.name) || f === mask) continue; // update_mask is made from the body's keys
      properties[f.name] = fieldSchema(f, dir);
      if (f.comment) properties[f.name] = { ...properties[f.name], description: f.comment.trim() };
      const behavior = f.options?.['(google.api.field_behavior)'];
      if (dir === 'output' || behavior === 'REQUIRED') required.push(f.name);
    }
    return {
      type: 'object',
      ...(type.comment ? { description: type.comment.trim() } : {}),
      properties,
      ...(required.length ? { required } : {}),
      ...(dir === 'input' ? { additionalProperties: false } : {}),
    };
  };

  const paths: Record<string, Record<string, unknown>> = {};
  const operationIds = new Set<string>();
  for (const r of routes) {
    const parameters: Schema[] = r.params.map((p) => ({
      name: p,
      in: 'path',
      required: true,
      schema: pathSchema(r.requestType.fields[p]!, fieldSchema),
    }));
    if (r.body !== '*') {
      for (const f of r.requestType.fieldsArray) {
        if (r.params.includes(f.name) || f.name === r.body || f.map) continue;
        f.resolve();
        if (
          f.resolvedType instanceof protobuf.Type &&
          f.resolvedType.fullName !== '.google.protobuf.Timestamp' &&
          !WRAPPERS[f.resolvedType.fullName]
        )
          continue;
        parameters.push({
          name: f.name,
          in: 'query',
          required: false,
          ...(f.repeated ? { style: 'form', explode: true } : {}),
          ...(f.comment ? { description: f.comment.trim() } : {}),
          // Contract §3: limit 1…, a value over 200 is clamped to 200 (so no maximum).
          schema:
            f.name === 'limit' && f.type === 'int32'
              ? { type: 'integer', minimum: 1, default: 50 }
              : queryParamSchema(f, fieldSchema),
        });
      }
    }
    let responseSchema: Schema | undefined;
    if (r.successStatus !== 204 && r.successStatus !== 302) {
      responseSchema = r.responseBody
        ? fieldSchema(r.responseType.fields[r.responseBody]!, 'output')
        : messageRef(r.responseType, 'output');
    }
    const requestSchema =
      r.body === '*'
        ? messageRef(r.requestType, 'input', r.params)
        : r.body
          ? fieldSchema(r.requestType.fields[r.body]!, 'input')
          : undefined;
    const operationId = operationIds.has(r.rpc) ? `${r.downstream}_${r.rpc}` : r.rpc;
    operationIds.add(operationId);
    const success =
      r.successStatus === 302
        ? {
            description: 'Redirect to Location',
            headers: { Location: { schema: { type: 'string', format: 'uri-reference' } } },
          }
        : r.successStatus === 204
          ? { description: 'Done; no content' }
          : // google.api.HttpBody: the bytes themselves, in the media types the rpc's policy declares.
            r.responseType.fullName === '.google.api.HttpBody'
            ? {
                description: 'OK: the body as its Content-Type says',
                content: Object.fromEntries(
                  (r.contentTypes.length ? r.contentTypes : ['*/*']).map((type) => [
                    type,
                    { schema: { type: 'string', format: 'binary' } },
                  ]),
                ),
              }
            : {
                description: r.successStatus === 201 ? 'Created' : 'OK',
                content: { 'application/json': { schema: responseSchema } },
              };
    const op: Record<string, unknown> = {
      operationId,
      tags: [r.downstream],
      summary: r.rpc,
      ...(r.description ? { description: r.description } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(requestSchema
        ? {
            requestBody: {
              required: r.body !== '*' || hasRequired(r.requestType, r.params),
              content: { 'application/json': { schema: requestSchema } },
            },
          }
        : {}),
      responses: {
        [String(r.successStatus)]: success,
        default: {
          description: "Error (the contract's §2 shape)",
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
      ...(r.auth === 'none' ? { security: [] } : {}),
      'x-workauto-policy': { auth: r.auth, ...(r.domain ? { domain: r.domain, level: r.level } : {}) },
    };
    (paths[r.template] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'workauto API',
      version: 'v1',
      description: 'Generated at start-up from the protos (google.api.http and workauto.api.v1.policy annotations).',
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key (wk_…), or the platform admin token for /admin routes.',
        },
      },
    },
  };
}

function hasRequired(type: protobuf.Type, exclude: string[]): boolean {
  return type.fieldsArray.some(
    (f) => !exclude.includes(f.name) && f.options?.['(google.api.field_behavior)'] === 'REQUIRED',
  );
}

/** Path variables are never null. */
function pathSchema(field: protobuf.Field, fieldSchema: (f: protobuf.Field, dir: Direction) => Schema): Schema {
  const s = fieldSchema(field, 'output');
  return (s.anyOf as Schema[] | undefined)?.[0] ?? s;
}

function queryParamSchema(field: protobuf.Field, fieldSchema: (f: protobuf.Field, dir: Direction) => Schema): Schema {
  const s = fieldSchema(field, 'output');
  if (field.repeated) return s;
  return (s.anyOf as Schema[] | undefined)?.[0] ?? s;
}
