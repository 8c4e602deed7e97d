import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildOpenApi } from './openapi.js';
import { buildRoutes, loadRoutes } from './routes.js';
import { fixtureFile } from '@workauto/protos/fixtures';
import { EVENT_TYPES } from '@workauto/events';

type Doc = {
  openapi: string;
  info: Record<string, any>;
  paths: Record<string, Record<string, any>>;
  webhooks: Record<string, any>;
  components: { schemas: Record<string, any> } & Record<string, Record<string, any>>;
};

describe('OpenAPI document', () => {
  it('lists every route of the real protos and validates as OpenAPI 3.1', async () => {
    const routes = await loadRoutes();
    const doc = buildOpenApi(routes) as Doc;
    for (const r of routes) assert.ok(doc.paths[r.template]?.[r.method.toLowerCase()], `${r.method} ${r.template}`);
    const create = doc.paths['/api/v1/calendars']!.post;
    assert.deepEqual(
      [create.summary, create.description],
      ['Create a calendar.', 'Creates a calendar; its timezone is the default of the events created in it.'],
      "the rpc's comment: its first paragraph is the summary, the rest the description",
    );
    const result = await new Validator().validate(doc);
    assert.equal(result.valid, true, String(JSON.stringify(result.errors)).slice(0, 2000));
  });

  it('follows the JSON mapping: request vs response schemas, nulls, enums, int64, timestamps, security', async () => {
    const doc = buildOpenApi(buildRoutes(fixtureFile('fixture')), { eventTypes: [] }) as Doc;
    assert.equal((await new Validator().validate(doc as never)).valid, true);
    const s = doc.components.schemas;
    const out = s['Thing'];
    assert.deepEqual(out.required.length, Object.keys(out.properties).length, 'a response carries every field');
    assert.deepEqual(out.properties.amount, { type: 'integer', format: 'int64' });
    assert.deepEqual(out.properties.note, { anyOf: [{ type: 'string' }, { type: 'null' }] });
    assert.deepEqual(out.properties.kind, {
      anyOf: [{ type: 'string', enum: ['big_box', 'small'] }, { type: 'null' }],
    });
    assert.deepEqual(out.properties.at, { anyOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }] });
    assert.deepEqual(out.properties.id, { type: 'string', format: 'uuid' });
    assert.deepEqual(out.properties.tags, { type: 'array', items: { type: 'string' } });
    const input = s['CreateThingRequest'];
    assert.deepEqual(input.required, ['name']);
    assert.deepEqual(input.properties.name, { type: 'string' }, 'a required field is never null');
    assert.deepEqual(input.properties.note, { anyOf: [{ type: 'string' }, { type: 'null' }] }, 'others may be');
    assert.equal(input.additionalProperties, false, 'unknown request fields are refused');
    const create = doc.paths['/api/v1/things']!.post;
    assert.ok(create.responses['201']);
    assert.deepEqual(
      [create.summary, create.description],
      ['CreateThing', 'Makes a thing.'],
      'a one-paragraph comment',
    );
    assert.equal(doc.paths['/api/v1/things/{id}']!.delete.responses['204'].content, undefined);
    const list = doc.paths['/api/v1/things']!.get;
    assert.deepEqual(list.responses['200'].content['application/json'].schema, {
      type: 'array',
      items: { $ref: '#/components/schemas/Thing' },
    });
    assert.deepEqual(
      list.parameters.map((p: { name?: string; $ref?: string }) => p.name ?? p.$ref),
      [
        'limit',
        'cursor',
        'kinds',
        'archived',
        'since',
        'min_amount',
        'min_ratio',
        'alias',
        '#/components/parameters/RequestId',
      ],
    );
    const label = doc.paths['/api/v1/things/{thing_id}/labels/{key}']!.put;
    assert.deepEqual(
      label.parameters
        .filter((p: { $ref?: string }) => !p.$ref)
        .map((p: { name: string; in: string }) => `${p.in}:${p.name}`),
      ['path:thing_id', 'path:key'],
    );
    assert.deepEqual(doc.paths['/api/v1/public/things/{id}']!.get.security, [], 'AUTH_NONE routes need no credential');
    assert.equal(doc.paths['/api/v1/things/{id}']!.get.security, undefined, 'others inherit bearer');
  });

  it('marks ids as UUIDs, except the ids docs/api.md §4 makes something else (external_id, actor_id)', async () => {
    const s = (buildOpenApi(await loadRoutes()) as Doc).components.schemas;
    const task = s['Task'];
    const { description, ...id } = task.properties.id;
    assert.deepEqual(id, { type: 'string', format: 'uuid' });
    assert.match(description, /id/, "the field's comment in the proto");
    assert.equal(
      JSON.stringify(task.properties.external_id).includes('uuid'),
      false,
      JSON.stringify(task.properties.external_id),
    );
    const entry = s['AuditLogEntry'];
    assert.equal(
      JSON.stringify(entry.properties.actor_id).includes('uuid'),
      false,
      JSON.stringify(entry.properties.actor_id),
    );
    assert.match(JSON.stringify(entry.properties.tenant_id), /uuid/);
  });

  it("states the protos' field rules: lengths, ranges, formats, patterns, item counts", async () => {
    const doc = buildOpenApi(await loadRoutes()) as Doc;
    const s = doc.components.schemas;
    const value = (schema: Record<string, unknown>) => {
      const { description: _d, ...rest } = schema;
      return (rest.anyOf as Record<string, unknown>[] | undefined)?.[0] ?? rest;
    };
    const task = s['CreateTaskRequest'].properties;
    assert.deepEqual(value(task.title), { type: 'string', maxLength: 500, minLength: 1, pattern: '\\S' });
    assert.deepEqual(value(task.due_date), { type: 'string', minLength: 1, format: 'date' });
    assert.deepEqual(value(task.estimation_minutes), {
      type: 'integer',
      format: 'int32',
      minimum: 0,
      maximum: 1000000,
    });
    const pipeline = s['CreatePipelineRequest'].properties;
    assert.equal(value(pipeline.stages).maxItems, 50);
    const provider = doc.paths['/api/v1/integration-keys/{provider}']!.put.parameters.find(
      (p: { name: string }) => p.name === 'provider',
    );
    assert.equal(provider.schema.pattern, '^[a-z0-9][a-z0-9_-]{0,63}$', 'a CEL rule that is one regular expression');

    // Apps and the audit log, like every other service.
    const param = (path: string, method: 'get' | 'put', name: string) =>
      doc.paths[path]![method].parameters.find((p: { name: string }) => p.name === name).schema;
    assert.equal(param('/api/v1/apps/{slug}', 'get', 'slug').pattern, '^[a-z][a-z0-9-]{1,62}$');
    assert.deepEqual(value(s['CreateAppRequest'].properties.display_name), {
      type: 'string',
      maxLength: 200,
      minLength: 1,
      pattern: '\\S',
    });
    assert.equal(param('/api/v1/audit-log', 'get', 'resource_id').format, 'uuid');
    assert.equal(param('/api/v1/audit-log', 'get', 'action').maxLength, 200);
    assert.deepEqual(param('/api/v1/audit-log/export', 'get', 'format').enum, ['ndjson', 'csv']);
  });

  it('documents every operation, property and parameter in words (the protos comments)', async () => {
    const doc = buildOpenApi(await loadRoutes()) as Doc;
    const missing: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        if (!op.summary || op.summary === op.operationId || !op.description) missing.push(`${method} ${path}`);
        for (const p of op.parameters.filter((p: any) => !p.$ref))
          if (!p.description) missing.push(`${method} ${path} ${p.in} ${p.name}`);
      }
    for (const [name, schema] of Object.entries(doc.components.schemas))
      for (const [prop, s] of Object.entries<any>(schema.properties ?? {}))
        if (!s.description) missing.push(`${name}.${prop}`);
    assert.deepEqual(missing, []);
  });

  it('fits the generators users run: stable lowerCamelCase operation ids, plain schema names, no recursion', async () => {
    const doc = buildOpenApi(await loadRoutes()) as Doc;
    assert.deepEqual(doc.info.license, { name: 'Apache-2.0', identifier: 'Apache-2.0' });
    const ids: string[] = [];
    for (const ops of Object.values(doc.paths)) for (const op of Object.values(ops)) ids.push(op.operationId);
    for (const hook of Object.values(doc.webhooks)) ids.push(hook.post.operationId);
    assert.deepEqual(
      ids.filter((id) => !/^[a-z][a-zA-Z0-9]*$/.test(id)),
      [],
      'operation ids are lowerCamelCase',
    );
    assert.equal(new Set(ids).size, ids.length, 'operation ids are unique');
    assert.equal(doc.paths['/api/v1/notes']!.post.operationId, 'createNote');
    assert.equal(doc.paths['/api/v1/deals']!.get.operationId, 'listDeals');
    assert.equal(doc.webhooks['note.created'].post.operationId, 'noteCreatedWebhook');
    const names = Object.keys(doc.components.schemas);
    assert.deepEqual(
      names.filter((n) => !/^[A-Z][a-zA-Z0-9]*$/.test(n)),
      [],
      'schema names are PascalCase words, without the package',
    );
    for (const kind of ['responses', 'parameters', 'headers'])
      assert.deepEqual(
        Object.keys(doc.components[kind]!).filter((n) => names.includes(n)),
        [],
        `no ${kind} name is also a schema name (oapi-codegen makes one type of each)`,
      );
    assert.ok(names.includes('Note') && names.includes('CreateNoteRequest') && names.includes('UpdateNoteBody'));
    // Any-JSON values are the empty schema: generators that follow $refs never loop.
    const refs = (value: unknown): string[] =>
      typeof value !== 'object' || value === null
        ? []
        : Array.isArray(value)
          ? value.flatMap(refs)
          : Object.entries(value).flatMap(([k, v]) =>
              k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')
                ? [v.slice('#/components/schemas/'.length)]
                : refs(v),
            );
    const cycle = (start: string): boolean => {
      const seen = new Set<string>();
      const stack = refs(doc.components.schemas[start]);
      while (stack.length) {
        const name = stack.pop()!;
        if (name === start) return true;
        if (seen.has(name)) continue;
        seen.add(name);
        stack.push(...refs(doc.components.schemas[name]));
      }
      return false;
    };
    assert.deepEqual(names.filter(cycle), [], 'no schema refers to itself');
    const metadata = doc.components.schemas.Note.properties.metadata;
    assert.deepEqual(metadata.anyOf[0], { type: 'object', additionalProperties: {} }, JSON.stringify(metadata));
  });

  it('declares the calendar feed as text/calendar text, with its token as a query parameter', async () => {
    const doc = buildOpenApi(await loadRoutes()) as Doc;
    const feed = doc.paths['/api/v1/calendars/{id}/events.ics']!.get;
    assert.deepEqual(Object.keys(feed.responses['200'].content), ['text/calendar']);
    assert.equal(feed.responses['200'].content['text/calendar'].schema.type, 'string');
    assert.equal(feed.responses['200'].content['text/calendar'].schema.format, undefined, 'text, not binary');
    const token = feed.parameters.find((p: { name?: string }) => p.name === 'token');
    assert.equal(token?.in, 'query');
    assert.equal(token?.required, false);
    assert.match(token?.description, /feed token/);
    assert.deepEqual(feed.security, [{ bearer: [] }, {}], 'an API key, or no credential with the token');
    assert.deepEqual(Object.keys(doc.components.securitySchemes!), ['bearer']);
    const exported = doc.paths['/api/v1/audit-log/export']!.get.responses['200'].content;
    for (const type of Object.keys(exported)) assert.equal(exported[type].schema.type, 'string', type);
  });

  it('declares the headers and the 4xx each operation can answer, with the error schema', async () => {
    const doc = buildOpenApi(await loadRoutes()) as Doc;
    for (const h of ['X-Request-Id', 'RateLimit', 'RateLimit-Policy', 'Retry-After', 'Idempotent-Replayed'])
      assert.ok(doc.components.headers![h].description, h);
    const create = doc.paths['/api/v1/calendars']!.post;
    assert.deepEqual(
      create.parameters.map((p: any) => p.$ref),
      ['#/components/parameters/RequestId', '#/components/parameters/IdempotencyKey'],
    );
    assert.deepEqual(Object.keys(create.responses), [
      '201',
      '400',
      '401',
      '403',
      '409',
      '413',
      '415',
      '429',
      'default',
    ]);
    assert.ok(create.responses['201'].headers['Idempotent-Replayed']);
    assert.ok(create.responses['201'].headers['X-Request-Id']);
    const get = doc.paths['/api/v1/notes/{id}']!.get;
    assert.deepEqual(Object.keys(get.responses), ['200', '400', '401', '403', '404', '429', 'default']);
    assert.equal(
      get.parameters.some((p: any) => p.$ref?.endsWith('IdempotencyKey')),
      false,
      'only writes take one',
    );
    const patch = doc.paths['/api/v1/notes/{id}']!.patch;
    assert.ok(
      patch.parameters.some((p: any) => p.$ref?.endsWith('IdempotencyKey')),
      'every write takes one: POST, PATCH, PUT, DELETE',
    );
    const claim = doc.paths['/api/v1/invitations/claim']!.post;
    assert.deepEqual(Object.keys(claim.responses), ['200', '400', '404', '409', '410', '413', '415', '429', 'default']);
    const tooMany = doc.components.responses!.TooManyRequests;
    assert.ok(tooMany.headers['Retry-After']);
    assert.deepEqual(tooMany.content['application/json'].schema, { $ref: '#/components/schemas/Error' });
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops))
        assert.ok(
          Object.keys(op.responses).some((s) => s.startsWith('4')),
          `${method} ${path} has no 4xx`,
        );
  });

  it('has a webhook per event type of GET /webhook-event-types, whose data is the resource', async () => {
    const doc = buildOpenApi(await loadRoutes()) as Doc;
    assert.deepEqual(Object.keys(doc.webhooks).sort(), EVENT_TYPES.map((t) => t.name).sort());
    const body = (name: string) => doc.webhooks[name].post.requestBody.content['application/json'].schema;
    assert.deepEqual(body('note.created').required, ['type', 'timestamp', 'data']);
    assert.equal(body('note.created').properties.type.const, 'note.created');
    assert.equal(body('note.created').properties.data.$ref, '#/components/schemas/Note');
    assert.equal(body('calendar_event.updated').properties.data.$ref, '#/components/schemas/CalendarEvent');
    for (const t of EVENT_TYPES) {
      const data = body(t.name).properties.data;
      // A schema only webhooks use is written inline (oapi-codegen prunes the others).
      assert.ok(
        data.$ref || data.properties || t.name === 'integration_key.deleted',
        `${t.name}: data is ${JSON.stringify(data)}`,
      );
    }
  });
});
