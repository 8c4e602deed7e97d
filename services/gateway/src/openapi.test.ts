import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildOpenApi } from './openapi.js';
import { buildRoutes, loadRoutes } from './routes.js';
import { fixtureFile } from '@workauto/protos/fixtures';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, any>>;
  components: { schemas: Record<string, any> };
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
    const result = await new Validator().validate(doc as never);
    assert.equal(result.valid, true, String(JSON.stringify(result.errors)).slice(0, 2000));
  });

  it('follows the JSON mapping: request vs response schemas, nulls, enums, int64, timestamps, security', async () => {
    const doc = buildOpenApi(buildRoutes(fixtureFile('fixture'))) as Doc;
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
      list.parameters.map((p: { name: string }) => p.name),
      ['limit', 'cursor', 'kinds', 'archived', 'since', 'min_amount', 'min_ratio', 'alias'],
    );
    const label = doc.paths['/api/v1/things/{thing_id}/labels/{key}']!.put;
    assert.deepEqual(
      label.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`),
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
});
