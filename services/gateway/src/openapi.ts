/**
 * An OpenAPI 3.1 document from the route table and the proto messages, with the JSON mapping's
 * rules. Requests and responses get separate schemas because the mapping treats them differently:
 * a response always carries every field (null when unset), a request may leave out all but the
 * REQUIRED ones and is refused with any other field.
 */
import type { DescField, DescFile, DescMessage } from '@bufbuild/protobuf';
import { EVENT_TYPES, type EventType } from '@workauto/events';
import { isGatewayField, isRequiredField, queryParameters, updateMaskField } from './transcode.js';
import { TOKEN_FIELD } from './routes.js';
import { WRAPPERS, commentOf, enumNames, fieldByName, isOptional, scalarName } from '@workauto/protos';
import { EXAMPLES } from './openapi-examples.js';
import { ruleKeywords } from './openapi-rules.js';
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
 * Any JSON value (metadata and other Struct/Value fields): the empty schema, never a recursive one,
 * which generators cannot follow (openapi-python-client drops every operation that reaches one).
 * A request body nests at most 32 levels (docs/api.md §4).
 */
const ANY_JSON: Schema = { description: 'Any JSON value (a request body nests at most 32 levels).' };

/**
 * `*_id` names that are not UUIDs (docs/api.md §4): a client's own identifier of a task
 * synced from elsewhere, an actor that may be `system` or `platform`, a client-chosen request id.
 * Every other string field named `id` or `*_id` is a UUID. A new non-UUID id goes on this list.
 */
const NON_UUID_ID_FIELDS = new Set(['external_id', 'actor_id', 'request_id']);

function isUuidField(name: string): boolean {
  return (name === 'id' || name.endsWith('_id')) && !NON_UUID_ID_FIELDS.has(name);
}

/** One entry of a BadRequest detail. */
const FIELD_VIOLATION: Schema = {
  type: 'object',
  description: 'One invalid field of the request.',
  required: ['field', 'description'],
  properties: {
    field: {
      type: 'string',
      description: 'Where: a body path such as `stages[1].name`, a query or path parameter, or `(body)`.',
    },
    description: { type: 'string', description: 'What is wrong with it and what the value must be.' },
  },
};

const ERROR_INFO: Schema = {
  type: 'object',
  description: 'Why the request failed, as a stable machine-readable reason (always the first detail).',
  required: ['@type', 'reason', 'domain', 'metadata'],
  properties: {
    '@type': { const: 'type.googleapis.com/google.rpc.ErrorInfo', description: 'The detail type.' },
    reason: {
      type: 'string',
      description: 'UPPER_SNAKE_CASE reason to branch on, e.g. NOTE_NOT_FOUND, RATE_LIMITED, IDEMPOTENCY_KEY_REUSED.',
    },
    domain: { type: 'string', description: 'Who raised it, e.g. `notes.workauto` or `gateway.workauto`.' },
    metadata: {
      type: 'object',
      additionalProperties: { type: 'string' },
      description: 'Facts about the failure as strings, e.g. `service` or `retry_after_seconds`.',
    },
  },
};

const BAD_REQUEST: Schema = {
  type: 'object',
  description: 'The invalid fields of an INVALID_ARGUMENT error (at most 50, then one `(more)` entry).',
  required: ['@type', 'field_violations'],
  properties: {
    '@type': { const: 'type.googleapis.com/google.rpc.BadRequest', description: 'The detail type.' },
    field_violations: {
      type: 'array',
      items: { $ref: '#/components/schemas/FieldViolation' },
      description: 'Each invalid field with what is wrong.',
    },
  },
};

const ERROR_SCHEMA: Schema = {
  type: 'object',
  description: 'The body of every error response (AIP-193).',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      description: 'What went wrong.',
      required: ['code', 'status', 'message', 'details', 'request_id'],
      properties: {
        code: { type: 'integer', description: 'The HTTP status.' },
        status: { type: 'string', description: 'The gRPC status name, e.g. INVALID_ARGUMENT.' },
        message: { type: 'string', description: 'For the developer: what went wrong and what to do next.' },
        details: {
          type: 'array',
          description: 'An ErrorInfo first; a BadRequest after it when fields are invalid.',
          items: {
            oneOf: [{ $ref: '#/components/schemas/ErrorInfo' }, { $ref: '#/components/schemas/BadRequest' }],
          },
        },
        request_id: { type: 'string', description: 'The X-Request-Id of the request: quote it when asking for help.' },
      },
    },
  },
  examples: [
    {
      error: {
        code: 400,
        status: 'INVALID_ARGUMENT',
        message: 'title: is required',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'INVALID_ARGUMENT',
            domain: 'gateway.workauto',
            metadata: {},
          },
          {
            '@type': 'type.googleapis.com/google.rpc.BadRequest',
            field_violations: [{ field: 'title', description: 'is required' }],
          },
        ],
        request_id: '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
      },
    },
  ],
};

const ref = (kind: string, name: string): Schema => ({ $ref: `#/components/${kind}/${name}` });

/** Response headers (docs/api.md §4, §9): every /api/v1 response carries the first three. */
const HEADERS: Record<string, Schema> = {
  'X-Request-Id': {
    description:
      "The request's id: the client's own X-Request-Id when it is 1–128 characters of `A-Z a-z 0-9 . _ : -`, else a new UUID. Error bodies and the audit log carry it too.",
    schema: { type: 'string' },
  },
  RateLimit: {
    description:
      'What is left of the per-credential limit (IETF RateLimit header fields, draft 8): `r` requests remain for `t` seconds, e.g. `"600-in-1min"; r=598; t=41`.',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description: 'The per-credential limit: `q` requests per `w` seconds, e.g. `"600-in-1min"; q=600; w=60`.',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Seconds to wait before sending the request again.',
    schema: { type: 'integer', minimum: 1 },
  },
  'Idempotent-Replayed': {
    description:
      '`true` when this is the stored response of an earlier request with the same Idempotency-Key: nothing was done again.',
    schema: { type: 'string', enum: ['true'] },
  },
  'WWW-Authenticate': {
    description: '`Bearer`: send an API key as `Authorization: Bearer wk_…`.',
    schema: { type: 'string' },
  },
};

const COMMON_HEADERS = ['X-Request-Id', 'RateLimit', 'RateLimit-Policy'];
const headerRefs = (names: string[]): Schema => Object.fromEntries(names.map((n) => [n, ref('headers', n)]));

function errorResponse(description: string, headers: string[] = []): Schema {
  return {
    description,
    headers: headerRefs([...COMMON_HEADERS, ...headers]),
    content: { 'application/json': { schema: ref('schemas', 'Error') } },
  };
}

/** The error responses operations refer to, by status (docs/api.md §5). */
const RESPONSES: Record<string, Schema> = {
  InvalidArgument: errorResponse(
    'INVALID_ARGUMENT: malformed JSON, an unknown or missing field, a wrong type, enum value or UUID. The BadRequest detail names each field; fix them and send again.',
  ),
  Unauthorized: errorResponse(
    'UNAUTHENTICATED: no credential, or one that is unknown, revoked or of a deactivated member. Send a valid API key as `Authorization: Bearer wk_…`.',
    ['WWW-Authenticate'],
  ),
  Forbidden: errorResponse(
    "PERMISSION_DENIED: the credential is valid, but its member's role or access policy does not allow this (the message names the domain and level needed).",
  ),
  NotFound: errorResponse(
    'NOT_FOUND: no such record for this tenant (it never existed, was deleted, or belongs to another tenant).',
  ),
  Conflict: errorResponse(
    'A conflict: ALREADY_EXISTS (a duplicate), FAILED_PRECONDITION (the record is in a state that forbids this), ABORTED `CONCURRENT_MODIFICATION` (another request changed the same records: send it again as is), or an Idempotency-Key used with another body (`IDEMPOTENCY_KEY_REUSED`) or still in use by the first request (`IDEMPOTENCY_KEY_IN_USE`, with Retry-After).',
    ['Retry-After'],
  ),
  Gone: errorResponse('FAILED_PRECONDITION: the invitation expired or was revoked; ask for a new one.'),
  PayloadTooLarge: errorResponse('The body is over 1 MiB (`BODY_TOO_LARGE`): send less data per request.'),
  UnsupportedMediaType: errorResponse(
    'The body is not JSON (`UNSUPPORTED_MEDIA_TYPE`): send it with `Content-Type: application/json`, without Content-Encoding other than gzip, deflate or br.',
  ),
  TooManyRequests: errorResponse(
    'RESOURCE_EXHAUSTED `RATE_LIMITED`: over the limit of the credential, the tenant or the client address. Wait Retry-After seconds.',
    ['Retry-After'],
  ),
  ServerError: errorResponse(
    'A server-side failure: 503 UNAVAILABLE (a service is down or overloaded, or the load is shed; always with Retry-After), 504 DEADLINE_EXCEEDED, or 500 INTERNAL (quote the request id). A 5xx never carries a stack trace.',
    ['Retry-After'],
  ),
};

const PARAMETERS: Record<string, Schema> = {
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes a retry safe: a repeat with the same key by the same credential within 24 hours gets the first response (with `Idempotent-Replayed: true`) without the work being done again; the same key with another body is a 409. 1–255 printable ASCII characters, e.g. a UUID per logical request.',
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
  },
  RequestId: {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    description:
      'Your id for this request (1–128 characters of `A-Z a-z 0-9 . _ : -`), echoed in the response, error bodies and logs; another value is replaced by a new UUID.',
    schema: { type: 'string' },
  },
};

/** The rpcs whose FAILED_PRECONDITION can be a 410 (the service says so per call). */
const GONE_RPCS = new Set(['ClaimInvitation']);

/** Event resource types whose data is not the message of the same name (docs/events.md). */
const EVENT_DATA_MESSAGES: Record<string, string> = { access_policies: 'ListAccessPoliciesResponse' };
/** Event types that carry no data (null). */
const EVENTS_WITHOUT_DATA = new Set(['integration_key.deleted']);

const LICENSE = { name: 'Apache-2.0', identifier: 'Apache-2.0' };

export interface OpenApiOptions {
  /** The event types of the `webhooks` section (default: the catalogue GET /webhook-event-types lists). */
  eventTypes?: readonly EventType[];
}

const nullable = (s: Schema): Schema => ({ anyOf: [s, { type: 'null' }] });
const pascal = (snake: string) => snake.replace(/(^|[_.])([a-z])/g, (_m, _u, c: string) => c.toUpperCase());
const lowerFirst = (name: string) => name.charAt(0).toLowerCase() + name.slice(1);

/**
 * The operation id of an rpc: its name in lowerCamelCase (`createNote`), which generators make the
 * function's name; with the service's name in front only where two services have an rpc of that name.
 */
function operationIdOf(r: Route, taken: Set<string>): string {
  const id = lowerFirst(r.rpc);
  return taken.has(id) ? lowerFirst(pascal(r.downstream) + r.rpc) : id;
}

/** A media type whose body is text (a string to generators), not bytes. */
const isTextType = (type: string) => /^text\/|^application\/(x-)?ndjson\b|^application\/([\w.-]+\+)?json\b/i.test(type);

/**
 * Response names of messages whose own name is their request body's: an invitation carries the
 * AccessPolicyInput it was created with, which is also what CreateInvitationRequest takes.
 */
const OUTPUT_NAMES: Record<string, string> = { 'workauto.identity.v1.AccessPolicyInput': 'InvitationAccessPolicy' };

/** A message's own name without its package: `Note`; a nested message `CreateTenantRequestOwner`. */
function messageName(type: DescMessage): string {
  const pkg = type.file.proto.package;
  return type.typeName.slice(pkg ? pkg.length + 1 : 0).replace(/\./g, '');
}

export function buildOpenApi(routes: Route[], options: OpenApiOptions = {}): Record<string, unknown> {
  const schemas: Record<string, Schema> = {
    Error: ERROR_SCHEMA,
    ErrorInfo: ERROR_INFO,
    BadRequest: BAD_REQUEST,
    FieldViolation: FIELD_VIOLATION,
  };
  /** Schema name → what it is (message, direction, the path variables a body leaves out): names are unique. */
  const owners = new Map<string, string>(Object.keys(schemas).map((n) => [n, n]));

  /** A message as a schema: a $ref to a named component, or inline for the well-known types. */
  const messageRef = (type: DescMessage, dir: Direction, exclude: string[] = []): Schema => {
    switch (type.typeName) {
      case 'google.protobuf.Timestamp':
        return { type: 'string', format: 'date-time' };
      case 'google.protobuf.Struct':
        return { type: 'object', additionalProperties: {} };
      case 'google.protobuf.Value':
        return { ...ANY_JSON };
      case 'google.protobuf.ListValue':
        return { type: 'array', items: {} };
    }
    const wrapped = WRAPPERS[type.typeName];
    if (wrapped) return { ...SCALARS[wrapped] };
    const base = type.typeName.replace(/^workauto\./, '');
    const name = schemaName(type, dir, exclude);
    if (!schemas[name]) {
      schemas[name] = {}; // placeholder against recursive messages
      const schema = messageSchema(type, dir, exclude);
      const example = dir === 'output' ? EXAMPLES[base] : undefined;
      schemas[name] = example ? { ...schema, examples: [completeExample(schema, example)] } : schema;
    }
    return { $ref: `#/components/schemas/${name}` };
  };

  /**
   * The name generators make a class of, so plain words: a response is the message's name (`Note`),
   * `…Result` for a `…Response` message (`ListNotesResult`: oapi-codegen names its own response
   * wrappers `<OperationId>Response`); a request body the request's (`CreateNoteRequest`), or `…Body`
   * when the path carries some of its fields (`UpdateNoteBody`); a message inside a request
   * `…Input` (`ReminderInput`). Names are stable: two schemas that would share one stop the build,
   * naming both.
   */
  const schemaName = (type: DescMessage, dir: Direction, exclude: string[]): string => {
    const own = messageName(type);
    const stem = own.replace(/Request$/, '');
    let name =
      dir === 'output'
        ? (OUTPUT_NAMES[type.typeName] ?? own.replace(/Response$/, 'Result'))
        : exclude.length
          ? `${stem}Body`
          : own.endsWith('Request') || own.endsWith('Input')
            ? own
            : `${own}Input`;
    const what = `${type.typeName} (${dir}${exclude.length ? ` without ${exclude.join(', ')}` : ''})`;
    // One message can back bodies with different path variables left out.
    if (exclude.length && owners.has(name) && owners.get(name) !== what)
      name = `${name}Without${exclude.map((e) => pascal(e)).join('')}`;
    const owner = owners.get(name);
    if (owner !== undefined && owner !== what)
      throw new Error(
        `two schemas of the OpenAPI document would be named ${name}: ${owner} and ${what}; rename a message or give one a name in services/gateway/src/openapi.ts`,
      );
    owners.set(name, what);
    return name;
  };

  /**
   * A field's schema. Null means "not set": optional fields, messages and enums (UNSPECIFIED) may be
   * null in responses; in a request any field may be null (left out; in a PATCH it clears the
   * field) except a REQUIRED one, which must carry a value.
   */
  const fieldSchema = (field: DescField, dir: Direction, required = false): Schema => {
    const scalar = field.scalar === undefined ? undefined : scalarName(field.scalar);
    const rules = ruleKeywords(field);
    const s: Schema = {
      ...(field.message
        ? messageRef(field.message, dir)
        : field.enum
          ? { type: 'string', enum: enumNames(field.enum) }
          : scalar === 'string' && isUuidField(field.name)
            ? { ...UUID_SCHEMA }
            : { ...SCALARS[scalar!] }),
      ...rules.value,
    };
    if (field.fieldKind === 'map') return { type: 'object', additionalProperties: s, ...rules.container };
    if (field.fieldKind === 'list') return { type: 'array', items: s, ...rules.container };
    const isValue = field.message?.typeName === 'google.protobuf.Value';
    if (required || isValue) return s;
    const canBeNull = isOptional(field) || field.message !== undefined || field.enum !== undefined;
    return canBeNull || dir === 'input' ? nullable(s) : s;
  };

  const messageSchema = (type: DescMessage, dir: Direction, exclude: string[]): Schema => {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    const mask = dir === 'input' ? updateMaskField(type) : undefined;
    for (const f of type.fields) {
      // update_mask is made from the body's keys; the gateway's own fields are never the client's.
      if (exclude.includes(f.name) || f === mask || (dir === 'input' && isGatewayField(f))) continue;
      const isRequired = dir === 'input' && isRequiredField(f);
      properties[f.name] = {
        ...fieldSchema(f, dir, isRequired),
        ...(commentOf(f) ? { description: commentOf(f) } : {}),
        ...(f.deprecated ? { deprecated: true } : {}),
      };
      if (dir === 'output' || isRequired) required.push(f.name);
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
  const tags = new Map<string, string>();
  for (const r of routes) {
    const { service, method } = rpcOf(r);
    if (!tags.has(r.downstream))
      tags.set(r.downstream, (service && commentOf(service)) || `The ${r.downstream.replace(/_/g, ' ')} service.`);
    const parameters: Schema[] = r.params.map((p) => {
      const field = fieldByName(r.requestType.desc, p)!;
      return {
        name: p,
        in: 'path',
        required: true,
        ...(commentOf(field) ? { description: commentOf(field) } : {}),
        schema: pathSchema(field, fieldSchema),
      };
    });
    for (const f of queryParameters(r)) {
      // A token route's token is a query parameter a client sets (a security scheme of type apiKey
      // would be a credential generators ask for on every call, or not at all).
      const token = r.auth === 'api_key_or_token' && f.name === TOKEN_FIELD;
      const description = token ? `${commentOf(f)} ${TOKEN_TEXT}`.trim() : commentOf(f);
      parameters.push({
        name: f.name,
        in: 'query',
        required: isRequiredField(f),
        ...(f.fieldKind === 'list' ? { style: 'form', explode: true } : {}),
        ...(description ? { description } : {}),
        ...(f.deprecated ? { deprecated: true } : {}),
        // limit is 1…; a value over 200 is taken as 200 (so no maximum).
        schema:
          f.name === 'limit' && f.scalar !== undefined && scalarName(f.scalar) === 'int32'
            ? { type: 'integer', minimum: 1, default: 50 }
            : queryParamSchema(f, fieldSchema),
      });
    }
    parameters.push(ref('parameters', 'RequestId'));
    if (r.method !== 'GET') parameters.push(ref('parameters', 'IdempotencyKey'));
    let responseSchema: Schema | undefined;
    if (r.successStatus !== 204 && r.successStatus !== 302 && r.responseType.desc.typeName !== 'google.api.HttpBody') {
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
    const operationId = operationIdOf(r, operationIds);
    operationIds.add(operationId);
    const successHeaders = headerRefs([...COMMON_HEADERS, ...(r.method !== 'GET' ? ['Idempotent-Replayed'] : [])]);
    const success =
      r.successStatus === 302
        ? {
            description: 'Redirect to Location',
            headers: {
              ...successHeaders,
              Location: {
                description: 'Where the browser goes next.',
                schema: { type: 'string', format: 'uri-reference' },
              },
            },
          }
        : r.successStatus === 204
          ? { description: 'Done; no content', headers: successHeaders }
          : // google.api.HttpBody: the body itself, in the media types the rpc's policy declares: text
            // (a string to generators) or bytes.
            r.responseType.desc.typeName === 'google.api.HttpBody'
            ? {
                description: 'OK: the body as its Content-Type says',
                headers: successHeaders,
                content: Object.fromEntries(
                  (r.contentTypes.length ? r.contentTypes : ['*/*']).map((type) => [
                    type,
                    { schema: isTextType(type) ? { type: 'string' } : { type: 'string', format: 'binary' } },
                  ]),
                ),
              }
            : {
                description: r.successStatus === 201 ? 'Created' : 'OK',
                headers: successHeaders,
                content: { 'application/json': { schema: responseSchema } },
              };
    const op: Record<string, unknown> = {
      operationId,
      tags: [r.downstream],
      ...operationText(r),
      ...(method?.deprecated ? { deprecated: true } : {}),
      parameters,
      ...(requestSchema
        ? {
            requestBody: {
              required: r.body !== '*' || hasRequired(r.requestType.desc, r.params),
              content: { 'application/json': { schema: requestSchema } },
            },
          }
        : {}),
      responses: { [String(r.successStatus)]: success, ...errorResponsesOf(r, requestSchema !== undefined) },
      ...(r.auth === 'none' ? { security: [] } : {}),
      // An API key, or none with the token parameter.
      ...(r.auth === 'api_key_or_token' ? { security: [{ bearer: [] }, {}] } : {}),
      'x-workauto-policy': { auth: r.auth, ...(r.domain ? { domain: r.domain, level: r.level } : {}) },
    };
    (paths[r.template] ??= {})[r.method.toLowerCase()] = op;
  }

  const webhooks = inlineWebhookOnlySchemas(
    webhooksOf(routes, options.eventTypes ?? EVENT_TYPES, messageRef),
    schemas,
    { paths, RESPONSES },
  );
  return {
    openapi: '3.1.0',
    info: {
      title: 'workauto API',
      version: 'v1',
      description: INFO_DESCRIPTION,
      license: LICENSE,
    },
    servers: [{ url: '/', description: 'This gateway' }],
    security: [{ bearer: [] }],
    tags: [
      ...[...tags].map(([name, description]) => ({ name, description })),
      ...(Object.keys(webhooks).length
        ? [
            {
              name: 'webhook-events',
              description: 'What the webhooks service POSTs to your endpoints, per event type.',
            },
          ]
        : []),
    ],
    paths,
    webhooks,
    components: {
      schemas,
      responses: RESPONSES,
      parameters: PARAMETERS,
      headers: HEADERS,
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

/** What a token parameter (AUTH_API_KEY_OR_TOKEN routes) says beside its field's comment. */
const TOKEN_TEXT =
  'For clients that cannot send an Authorization header: with it, no credential is needed. It reads this one resource and nothing else (the `token` of the feed_url that POST /api/v1/calendars/{id}/feed-token returns); a wrong or revoked token is a 404.';

const INFO_DESCRIPTION = [
  'The REST API of workauto, generated from the protos (google.api.http and workauto.api.v1.policy annotations).',
  '',
  '- **Authentication**: `Authorization: Bearer <API key>` (wk_…); the platform admin token for `POST /api/v1/admin/tenants`.',
  '- **Errors**: every 4xx and 5xx has the `Error` body (AIP-193): a status, a message saying what to do, an ErrorInfo reason and, for invalid input, the invalid fields.',
  '- **Lists**: `{data, has_more, next_cursor}`; pass `next_cursor` as `cursor` for the next page; `limit` 1–200 (default 50).',
  '- **Retries**: send an `Idempotency-Key` with a POST, PATCH, PUT or DELETE to make its retry safe.',
  '- **Rate limits**: per credential and per tenant; a 429 carries Retry-After.',
  '- **Webhooks**: the `webhooks` section lists what each event type delivers to your endpoints.',
].join('\n');

/** The service and the rpc a route comes from (for its tag's and deprecation's sake). */
function rpcOf(r: Route) {
  const [, serviceName, rpc] = r.grpcPath.split('/');
  const service = r.requestType.desc.file.services.find((s) => s.typeName === serviceName);
  return { service, method: service?.methods.find((m) => m.name === rpc) };
}

/** Which of the 4xx of docs/api.md §5 an operation can answer, plus the 5xx as `default`. */
function errorResponsesOf(r: Route, hasBody: boolean): Record<string, Schema> {
  const out: Record<string, Schema> = { '400': ref('responses', 'InvalidArgument') };
  if (r.auth !== 'none') {
    out['401'] = ref('responses', 'Unauthorized');
    out['403'] = ref('responses', 'Forbidden');
  }
  // A path id, or an id in the body that names another record (a calendar_id of another tenant is a 404).
  const refersToRecord =
    r.params.length > 0 ||
    (r.body === '*' && r.requestType.desc.fields.some((f) => f.name.endsWith('_id') && isUuidField(f.name)));
  if (refersToRecord || r.auth === 'none') out['404'] = ref('responses', 'NotFound');
  // Every change can meet a concurrent one (ABORTED), a state conflict or an Idempotency-Key conflict.
  if (r.method !== 'GET') out['409'] = ref('responses', 'Conflict');
  if (GONE_RPCS.has(r.rpc)) out['410'] = ref('responses', 'Gone');
  if (hasBody) {
    out['413'] = ref('responses', 'PayloadTooLarge');
    out['415'] = ref('responses', 'UnsupportedMediaType');
  }
  out['429'] = ref('responses', 'TooManyRequests');
  out.default = ref('responses', 'ServerError');
  return out;
}

/**
 * The `webhooks` section: what the webhooks service POSTs to an endpoint for each event type of the
 * catalogue (GET /webhook-event-types). `data` is the resource as the REST API returns it.
 */
function webhooksOf(
  routes: Route[],
  eventTypes: readonly EventType[],
  messageRef: (type: DescMessage, dir: Direction) => Schema,
): Record<string, unknown> {
  if (!eventTypes.length) return {};
  const files = new Set<DescFile>(routes.map((r) => r.requestType.desc.file));
  const messages = new Map<string, DescMessage>();
  for (const file of files) for (const m of file.messages) messages.set(m.name, m);
  const out: Record<string, unknown> = {};
  for (const t of eventTypes) {
    const resource = t.name.slice(0, t.name.indexOf('.'));
    const message = messages.get(EVENT_DATA_MESSAGES[resource] ?? pascal(resource));
    const data: Schema = EVENTS_WITHOUT_DATA.has(t.name)
      ? { type: 'null', description: 'This event carries no data.' }
      : message
        ? {
            ...messageRef(message, 'output'),
            description: `The ${resource.replace(/_/g, ' ')} after the change, as the REST API returns it.`,
          }
        : { type: 'object', additionalProperties: {}, description: 'The resource after the change.' };
    const [summary = t.name] = t.description.split(/:\s|\.\s|\.$/);
    out[t.name] = {
      post: {
        operationId: `${lowerFirst(pascal(t.name))}Webhook`,
        summary,
        description: `${t.description}\n\nDelivered to every enabled endpoint subscribed to \`${t.name}\` (or to its resource's channel), signed per Standard Webhooks: verify \`webhook-signature\` over \`{webhook-id}.{webhook-timestamp}.{body}\` with the endpoint's signing secret, and deduplicate on \`webhook-id\`.`,
        tags: ['webhook-events'],
        security: [],
        parameters: [
          {
            name: 'webhook-id',
            in: 'header',
            required: true,
            description: "The event's id: the same on every retry (deduplicate on it).",
            schema: { type: 'string', format: 'uuid' },
          },
          {
            name: 'webhook-timestamp',
            in: 'header',
            required: true,
            description: 'When this attempt was signed, in Unix seconds (refuse one more than 5 minutes off).',
            schema: { type: 'string' },
          },
          {
            name: 'webhook-signature',
            in: 'header',
            required: true,
            description:
              'Space-separated `v1,<base64 HMAC-SHA256>` signatures (two while a rotated secret is in its grace period).',
            schema: { type: 'string' },
          },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['type', 'timestamp', 'data'],
                properties: {
                  type: { const: t.name, description: 'The event type.' },
                  timestamp: { type: 'string', format: 'date-time', description: 'When the change happened.' },
                  data,
                },
              },
            },
          },
        },
        responses: {
          '200': { description: 'Any 2xx within the timeout (15 s by default): delivered.' },
          '4XX': {
            description:
              'Any other status, a redirect, or no answer in time: the attempt failed and is retried on the retry schedule; after days of failures the endpoint is disabled.',
          },
        },
      },
    };
  }
  return out;
}

const SCHEMA_REF = '#/components/schemas/';

/** The schema names a value refers to, directly. */
function refsOf(value: unknown, out = new Set<string>()): Set<string> {
  if (typeof value !== 'object' || value === null) return out;
  if (Array.isArray(value)) {
    for (const v of value) refsOf(v, out);
    return out;
  }
  for (const [k, v] of Object.entries(value)) {
    if (k === '$ref' && typeof v === 'string' && v.startsWith(SCHEMA_REF)) out.add(v.slice(SCHEMA_REF.length));
    else refsOf(v, out);
  }
  return out;
}

/**
 * The webhooks with the schemas only they use written inline, and those schemas dropped from
 * `components`: oapi-codegen generates the webhooks' bodies but prunes every schema the paths do
 * not reach, so a body naming one would not build.
 */
function inlineWebhookOnlySchemas(
  webhooks: Record<string, unknown>,
  schemas: Record<string, Schema>,
  fromPaths: unknown,
): Record<string, unknown> {
  const reached = new Set<string>();
  const stack = [...refsOf(fromPaths)];
  while (stack.length) {
    const name = stack.pop()!;
    if (reached.has(name)) continue;
    reached.add(name);
    stack.push(...refsOf(schemas[name]));
  }
  const inline = (value: unknown, seen: string[]): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    if (Array.isArray(value)) return value.map((v) => inline(v, seen));
    const { $ref, ...rest } = value as Record<string, unknown>;
    if (typeof $ref === 'string' && $ref.startsWith(SCHEMA_REF) && !reached.has($ref.slice(SCHEMA_REF.length))) {
      const name = $ref.slice(SCHEMA_REF.length);
      if (seen.includes(name)) throw new Error(`schema ${name} refers to itself: it cannot be written inline`);
      return { ...(inline(schemas[name], [...seen, name]) as Schema), ...rest };
    }
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, inline(v, seen)]));
  };
  const out = inline(webhooks, []) as Record<string, unknown>;
  for (const name of Object.keys(schemas)) if (!reached.has(name)) delete schemas[name];
  return out;
}

/** An example with every property of its schema: the ones it leaves out are null (or [] / {}). */
function completeExample(schema: Schema, example: Record<string, unknown>): Record<string, unknown> {
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(properties)) {
    if (name in example) out[name] = example[name];
    else if (s.type === 'array') out[name] = [];
    else if (s.type === 'object') out[name] = {};
    else out[name] = null;
  }
  return out;
}

/**
 * An rpc's comment as the protos write it: a one-line summary, a blank line, then the description
 * (a comment of one paragraph is the description; the rpc's name is the summary then).
 */
function operationText(r: Route): { summary: string; description: string } {
  const [first = '', ...rest] = r.description.split(/\n\s*\n/);
  if (!rest.length) return { summary: r.rpc, description: first || r.rpc };
  return { summary: first.replace(/\s*\n\s*/g, ' '), description: rest.join('\n\n') };
}

function hasRequired(type: DescMessage, exclude: string[]): boolean {
  return type.fields.some((f) => !exclude.includes(f.name) && isRequiredField(f));
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
