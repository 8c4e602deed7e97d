/**
 * An OpenAPI 3.1 document from the route table and the proto messages, with the JSON mapping's
 * rules. Requests and responses get separate schemas because the mapping treats them differently:
 * a response always carries every field (null when unset), a request may leave out all but the
 * REQUIRED ones and is refused with any other field.
 */
import type { DescField, DescMessage } from '@bufbuild/protobuf';
import { updateMaskField } from './transcode.js';
import { WRAPPERS, commentOf, enumNames, fieldByName, isOptional, optionOf, scalarName } from '@workauto/protos';
import { FieldBehavior } from '@workauto/protos/google/api/field_behavior.js';
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
  const messageRef = (type: DescMessage, dir: Direction, exclude: string[] = []): Schema => {
    switch (type.typeName) {
      case 'google.protobuf.Timestamp':
        return { type: 'string', format: 'date-time' };
      case 'google.protobuf.Struct':
        return { type: 'object', additionalProperties: JSON_VALUE_REF };
      case 'google.protobuf.Value':
        return { ...JSON_VALUE_REF };
      case 'google.protobuf.ListValue':
        return { type: 'array', items: JSON_VALUE_REF };
    }
    const wrapped = WRAPPERS[type.typeName];
    if (wrapped) return { ...SCALARS[wrapped] };
    // '-' never occurs in a proto name, so a request variant cannot collide with a message (AccessPolicyInput).
    const base = type.typeName.replace(/^workauto\./, '');
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

  const fieldSchema = (field: DescField, dir: Direction): Schema => {
    const scalar = field.scalar === undefined ? undefined : scalarName(field.scalar);
    let s: Schema = field.message
      ? messageRef(field.message, dir)
      : field.enum
        ? { type: 'string', enum: enumNames(field.enum) }
        : scalar === 'string' && isUuidField(field.name)
          ? { ...UUID_SCHEMA }
          : { ...SCALARS[scalar!] };
    if (field.fieldKind === 'map') return { type: 'object', additionalProperties: s };
    if (field.fieldKind === 'list') return { type: 'array', items: s };
    // Null means "not set": for optional fields, messages and enums (whose UNSPECIFIED value is null).
    const canBeNull = isOptional(field) || field.message !== undefined || field.enum !== undefined;
    const isValue = field.message?.typeName === 'google.protobuf.Value';
    if (canBeNull && !isValue) s = nullable(s);
    // In a request, null is accepted for any field: left out, except in a PATCH, where it clears the field.
    else if (dir === 'input' && !isValue) s = nullable(s);
    return s;
  };

  const messageSchema = (type: DescMessage, dir: Direction, exclude: string[]): Schema => {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    const mask = dir === 'input' ? updateMaskField(type) : undefined;
    for (const f of type.fields) {
      if (exclude.includes(f.name) || f === mask) continue; // update_mask is made from the body's keys
      properties[f.name] = fieldSchema(f, dir);
      const comment = commentOf(f);
      if (comment) properties[f.name] = { ...properties[f.name], description: comment };
      if (dir === 'output' || isRequired(f)) required.push(f.name);
    }
    const comment = commentOf(type);
    return {
      type: 'object',
      ...(comment ? { description: comment } : {}),
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
      schema: pathSchema(fieldByName(r.requestType.desc, p)!, fieldSchema),
    }));
    if (r.body !== '*') {
      for (const f of r.requestType.desc.fields) {
        if (r.params.includes(f.name) || f.name === r.body || f.fieldKind === 'map') continue;
        if (f.message && f.message.typeName !== 'google.protobuf.Timestamp' && !WRAPPERS[f.message.typeName]) continue;
        const comment = commentOf(f);
        parameters.push({
          name: f.name,
          in: 'query',
          required: false,
          ...(f.fieldKind === 'list' ? { style: 'form', explode: true } : {}),
          ...(comment ? { description: comment } : {}),
          // Contract §3: limit 1…, a value over 200 is clamped to 200 (so no maximum).
          schema:
            f.name === 'limit' && f.scalar !== undefined && scalarName(f.scalar) === 'int32'
              ? { type: 'integer', minimum: 1, default: 50 }
              : queryParamSchema(f, fieldSchema),
        });
      }
    }
    let responseSchema: Schema | undefined;
    if (r.successStatus !== 204 && r.successStatus !== 302) {
      responseSchema = r.responseBody
        ? fieldSchema(fieldByName(r.responseType.desc, r.responseBody)!, 'output')
        : messageRef(r.responseType.desc, 'output');
    }
    const requestSchema =
      r.body === '*'
        ? messageRef(r.requestType.desc, 'input', r.params)
        : r.body
          ? fieldSchema(fieldByName(r.requestType.desc, r.body)!, 'input')
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
            r.responseType.desc.typeName === 'google.api.HttpBody'
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
      ...operationText(r),
      ...(parameters.length ? { parameters } : {}),
      ...(requestSchema
        ? {
            requestBody: {
              required: r.body !== '*' || hasRequired(r.requestType.desc, r.params),
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

/**
 * An rpc's comment as the protos write it: a one-line summary, a blank line, then the description
 * (a comment of one paragraph is the description; the rpc's name is the summary then).
 */
function operationText(r: Route): { summary: string; description?: string } {
  const [first = '', ...rest] = r.description.split(/\n\s*\n/);
  if (!rest.length) return { summary: r.rpc, ...(first ? { description: first } : {}) };
  return { summary: first.replace(/\s*\n\s*/g, ' '), description: rest.join('\n\n') };
}

function hasRequired(type: DescMessage, exclude: string[]): boolean {
  return type.fields.some((f) => !exclude.includes(f.name) && isRequired(f));
}

/** `[(google.api.field_behavior) = REQUIRED]`: a request must carry the field. */
function isRequired(field: DescField): boolean {
  return optionOf<FieldBehavior[]>(field, 'google.api.field_behavior')?.includes(FieldBehavior.REQUIRED) ?? false;
}

/** Path variables are never null. */
function pathSchema(field: DescField, fieldSchema: (f: DescField, dir: Direction) => Schema): Schema {
  const s = fieldSchema(field, 'output');
  return (s.anyOf as Schema[] | undefined)?.[0] ?? s;
}

function queryParamSchema(field: DescField, fieldSchema: (f: DescField, dir: Direction) => Schema): Schema {
  const s = fieldSchema(field, 'output');
  if (field.fieldKind === 'list') return s;
  return (s.anyOf as Schema[] | undefined)?.[0] ?? s;
}
