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
    const out = s['fixture.v1.Thing'];
    assert.deepEqual(out.required.length, Object.keys(out.properties).length, 'a response carries every field');
    assert.deepEqual(out.properties.amount, { type: 'integer', format: 'int64' });
    assert.deepEqual(out.properties.note, { anyOf: [{ type: 'string' }, { type: 'null' }] });
    assert.deepEqual(out.properties.kind, {
      anyOf: [{ type: 'string', enum: ['big_box', 'small'] }, { type: 'null' }],
    });
    assert.deepEqual(out.properties.at, { anyOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }] });
    assert.deepEqual(out.properties.id, { type: 'string', format: 'uuid' });
    assert.deepEqual(out.properties.tags, { type: 'array', items: { type: 'string' } });
    const input = s['fixture.v1.CreateThingRequest-Request'];
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
      items: { $ref: '#/components/schemas/fixture.v1.Thing' },
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

  it('marks ids as UUIDs, except the ids the contract makes something else (external_id, actor_id)', async () => {
    const s = (buildOpenApi(await loadRoutes()) as Doc).components.schemas;
    const task = s['notes_tasks.v1.Task'];
    const { description, ...id } = task.properties.id;
    assert.deepEqual(id, { type: 'string', format: 'uuid' });
    assert.match(description, /id/, "the field's comment in the proto");
    assert.equal(
      JSON.stringify(task.properties.external_id).includes('uuid'),
      false,
      JSON.stringify(task.properties.external_id),
    );
    const entry = s['identity.v1.AuditLogEntry'];
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
    const task = s['notes_tasks.v1.CreateTaskRequest-Request'].properties;
    assert.deepEqual(value(task.title), { type: 'string', maxLength: 500, minLength: 1, pattern: '\\S' });
    assert.deepEqual(value(task.due_date), { type: 'string', minLength: 1, format: 'date' });
    assert.deepEqual(value(task.estimation_minutes), {
      type: 'integer',
      format: 'int32',
      minimum: 0,
      maximum: 1000000,
    });
    const pipeline = s['crm_pipelines.v1.CreatePipelineRequest-Request'].properties;
    assert.equal(value(pipeline.stages).maxItems, 50);
    const provider = doc.paths['/api/v1/integration-keys/{provider}']!.put.parameters.find(
      (p: { name: string }) => p.name === 'provider',
    );
    assert.equal(provider.schema.pattern, '^[a-z0-9][a-z0-9_-]{0,63}$', 'a CEL rule that is one regular expression');
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
    assert.equal(doc.info.license.name, 'Proprietary');
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
    assert.equal(body('note.created').properties.data.$ref, '#/components/schemas/notes_tasks.v1.Note');
    assert.equal(body('calendar_event.updated').properties.data.$ref, '#/components/schemas/calendar.v1.CalendarEvent');
    for (const t of EVENT_TYPES) {
      const data = body(t.name).properties.data;
      assert.ok(data.$ref || t.name === 'integration_key.deleted', `${t.name}: data is ${JSON.stringify(data)}`);
    }
  });
});
