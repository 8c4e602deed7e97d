/** An OpenAPI 3.1 document from the route table and the proto messages, with the same JSON mapping. */
import protobuf from 'protobufjs';
import { enumNames, isOptional } from './json-mapping.js';
import type { Route } from './routes.js';

type Schema = Record<string, unknown>;

const SCALARS: Record<string, Schema> = {
  string: { type: 'string' }, bool: { type: 'boolean' }, double: { type: 'number' }, float: { type: 'number' },
  int32: { type: 'integer', format: 'int32' }, sint32: { type: 'integer', format: 'int32' }, sfixed32: { type: 'integer', format: 'int32' },
  uint32: { type: 'integer', minimum: 0 }, fixed32: { type: 'integer', minimum: 0 },
  int64: { type: 'integer', format: 'int64' }, sint64: { type: 'integer', format: 'int64' }, sfixed64: { type: 'integer', format: 'int64' },
  uint64: { type: 'integer', minimum: 0 }, fixed64: { type: 'integer', minimum: 0 }, bytes: { type: 'string', contentEncoding: 'base64' },
};

const ERROR_SCHEMA: Schema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'status', 'message', 'details'],
      properties: {
        code: { type: 'integer' },
        status: { type: 'string' },
        message: { type: 'string' },
        details: { type: 'array', items: { type: 'object' } },
        request_id: { type: 'string' },
      },
    },
  },
};

export function buildOpenApi(routes: Route[]): Record<string, unknown> {
  const schemas: Record<string, Schema> = { Error: ERROR_SCHEMA };
  const ref = (type: protobuf.Type, exclude: string[] = []): Schema => {
    switch (type.fullName) {
      case '.google.protobuf.Timestamp': return { type: 'string', format: 'date-time' };
      case '.google.protobuf.Struct': return { type: 'object' };
      case '.google.protobuf.Value': return {};
      case '.google.protobuf.ListValue': return { type: 'array' };
      case '.google.protobuf.Empty': return { type: 'object' };
    }
    const name = type.fullName.slice(1).replace(/^workauto\./, '') + (exclude.length ? `.Body` : '');
    if (!schemas[name]) {
      schemas[name] = {}; // placeholder against recursion
      schemas[name] = messageSchema(type, exclude);
    }
    return { $ref: `#/components/schemas/${name}` };
  };
  const fieldSchema = (field: protobuf.Field): Schema => {
    field.resolve();
    const rt = field.resolvedType;
    let s: Schema = rt instanceof protobuf.Type ? ref(rt) : rt instanceof protobuf.Enum ? { type: 'string', enum: enumNames(rt) } : { ...SCALARS[field.type] };
    if (field.map) s = { type: 'object', additionalProperties: s };
    else if (field.repeated) s = { type: 'array', items: s };
    else if (isOptional(field) || rt instanceof protobuf.Type || rt instanceof protobuf.Enum) s = { anyOf: [s, { type: 'null' }] };
    return s;
  };
  const messageSchema = (type: protobuf.Type, exclude: string[]): Schema => {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const f of type.fieldsArray) {
      if (exclude.includes(f.name)) continue;
      properties[f.name] = fieldSchema(f);
      const behavior = f.options?.['(google.api.field_behavior)'];
      if (behavior === 'REQUIRED') required.push(f.name);
    }
    return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const parameters: Schema[] = r.params.map((p) => ({ name: p, in: 'path', required: true, schema: fieldSchema(r.requestType.fields[p]!) }));
    if (r.body !== '*') {
      for (const f of r.requestType.fieldsArray) {
        if (r.params.includes(f.name) || f.name === r.body || f.map) continue;
        parameters.push({ name: f.name, in: 'query', required: false, schema: fieldSchema(f) });
      }
    }
    let responseSchema: Schema | undefined;
    if (r.successStatus !== 204 && r.successStatus !== 302) {
      responseSchema = r.responseBody ? fieldSchema(r.responseType.fields[r.responseBody]!) : ref(r.responseType);
    }
    const op: Record<string, unknown> = {
      operationId: r.rpc,
      tags: [r.downstream],
      ...(r.description ? { description: r.description } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body
        ? { requestBody: { required: true, content: { 'application/json': { schema: r.body === '*' ? ref(r.requestType, r.params) : fieldSchema(r.requestType.fields[r.body]!) } } } }
        : {}),
      responses: {
        [String(r.successStatus)]: r.successStatus === 302
          ? { description: 'Redirect', headers: { Location: { schema: { type: 'string' } } } }
          : { description: 'Success', ...(responseSchema ? { content: { 'application/json': { schema: responseSchema } } } : {}) },
        default: { description: 'Error (contract §2)', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
      },
      ...(r.auth === 'none' ? { security: [] } : {}),
      'x-required-access': r.domain ? `${r.domain}:${r.level}` : r.auth,
    };
    (paths[r.template] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'workauto API', version: 'v1', description: 'Generated from the protos (google.api.http annotations).' },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }],
    paths,
    components: { schemas, securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
  };
}
