/**
 * The OpenAPI document's `required` against the server (docs/api.md §4): every request body field
 * the document lists as required is refused when it is left out (400 naming it), and a body that
 * carries every listed field is never refused for a missing field the document does not list.
 * Raw HTTP on purpose: these requests are deliberately incomplete.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startTestStack, violations, type TenantFixture, type TestStack } from './harness.js';

type Schema = Record<string, any>;
type Doc = { paths: Record<string, Record<string, any>>; components: { schemas: Record<string, Schema> } };

/**
 * Fields a service requires only together with or instead of others (so not `required` in the
 * document): an event needs start_at and end_at unless it is all-day (then start_date and end_date).
 */
const CONDITIONAL: Record<string, string[]> = {
  createEvent: ['start_at', 'end_at', 'start_date', 'end_date'],
};

describe('OpenAPI required fields = what the server refuses without', () => {
  let stack: TestStack;
  let tenant: TenantFixture;
  let doc: Doc;
  /** Real records for path variables and *_id fields, so a request reaches its service's validation. */
  const ids: Record<string, string> = {};

  before(async () => {
    stack = await startTestStack();
    tenant = await stack.createTenant();
    doc = (await stack.api('GET', '/api/v1/openapi.json')).body;
    const make = async (path: string, body: unknown) => {
      const res = await stack.api('POST', path, { key: tenant.key, body });
      assert.equal(res.status, 201, `${path}: ${JSON.stringify(res.body)}`);
      return res.body;
    };
    ids.note = (await make('/api/v1/notes', { title: 'n' })).id;
    ids.task = (await make('/api/v1/tasks', { title: 't' })).id;
    const pipeline = await make('/api/v1/pipelines', { name: 'p', stages: [{ name: 's', stage_type: 'open' }] });
    ids.pipeline = pipeline.id;
    ids.stage = pipeline.stages[0].id;
    ids.contact = (await make('/api/v1/contacts', { name: 'c' })).id;
    ids.calendar = (await make('/api/v1/calendars', { name: 'c' })).id;
    ids.member = tenant.ownerId;
    ids.blueprint = (await stack.api('GET', '/api/v1/agent-blueprints', { key: tenant.key })).body.data[0].id;
  });
  after(() => stack?.stop());

  it('serves the document the build wrote for the typed client and for redocly (make openapi-lint)', () => {
    const built = new URL('../../../../libs/client/openapi.json', import.meta.url);
    assert.deepEqual(doc, JSON.parse(readFileSync(built, 'utf8')));
  });

  const resolve = (s: Schema): Schema => (s?.$ref ? doc.components.schemas[s.$ref.split('/').pop()]! : s);
  const nonNull = (s: Schema): Schema => (s?.anyOf ? s.anyOf.find((x: Schema) => x.type !== 'null') : s);

  /** A value of the schema's type: every required property filled, recursively. */
  function fill(name: string, schema: Schema): unknown {
    const s = resolve(nonNull(schema));
    if (s.enum) return s.enum[0];
    if (s.type === 'object' && s.properties) {
      return Object.fromEntries((s.required ?? []).map((p: string) => [p, fill(p, s.properties[p])]));
    }
    if (s.type === 'object' || s.$ref || s.anyOf) return {};
    if (s.type === 'array') return [];
    if (s.type === 'integer' || s.type === 'number') return 1;
    if (s.type === 'boolean') return true;
    if (s.format === 'uuid') return ids[name.replace(/_id$/, '')] ?? randomUUID();
    if (s.format === 'date-time') return new Date(Date.now() + 86_400_000).toISOString();
    return 'x';
  }

  /** The JSON-body operations whose body schema lists required fields. */
  function bodyOperations() {
    const out: { method: string; path: string; op: any; body: Schema }[] = [];
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const body = op.requestBody?.content?.['application/json']?.schema;
        if (body && resolve(nonNull(body)).required?.length) out.push({ method, path, op, body: resolve(body) });
      }
    return out;
  }

  /** The path with real ids where the variable's resource is known, random UUIDs elsewhere. */
  function concretePath(path: string): string {
    const resource = /^\/api\/v1\/([a-z-]+)/.exec(path)?.[1] ?? '';
    const byResource: Record<string, string | undefined> = {
      notes: ids.note,
      tasks: ids.task,
      pipelines: ids.pipeline,
      contacts: ids.contact,
      calendars: ids.calendar,
      members: ids.member,
    };
    return path.replace(/\{([a-z_]+)\}/g, (_m, v: string) =>
      v === 'id' ? (byResource[resource] ?? randomUUID()) : (ids[v.replace(/_id$/, '')] ?? randomUUID()),
    );
  }

  it('every required body field left out is a 400 naming it (nested ones by their path)', async () => {
    const ops = bodyOperations();
    assert.ok(ops.length >= 15, `only ${ops.length} operations with required fields`);
    for (const { method, path, op, body } of ops) {
      const full = fill('', body) as Record<string, unknown>;
      const cases: [string, Record<string, unknown>][] = [];
      for (const field of body.required as string[]) {
        const { [field]: _left, ...without } = full;
        cases.push([field, without]);
        // One level down: a required object's own required fields (owner.email).
        const inner = resolve(nonNull(body.properties[field]));
        for (const sub of inner.type === 'object' ? (inner.required ?? []) : []) {
          const { [sub]: _gone, ...rest } = full[field] as Record<string, unknown>;
          cases.push([`${field}.${sub}`, { ...full, [field]: rest }]);
        }
      }
      for (const [field, sent] of cases) {
        const key = op.security?.length === 0 ? undefined : path.includes('/admin/') ? stack.adminToken : tenant.key;
        const res = await stack.api(method.toUpperCase(), concretePath(path), { key, body: sent });
        assert.equal(res.status, 400, `${method} ${path} without ${field}: ${JSON.stringify(res.body)}`);
        assert.ok(violations(res).includes(field), `${method} ${path} without ${field}: ${violations(res)}`);
      }
    }
  });

  it('a body with every required field is never refused for another missing field', async () => {
    let reached = 0;
    const problems: string[] = [];
    for (const { method, path, op, body } of bodyOperations().concat(requiredlessCreates())) {
      if (path.includes('/admin/') || op.security?.length === 0) continue;
      const sent = fill('', body);
      const res = await stack.api(method.toUpperCase(), concretePath(path), { key: tenant.key, body: sent });
      if (res.status === 404) continue; // a path variable of a record this test did not make
      reached++;
      if (res.status !== 400) continue;
      const bad = res.body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('.BadRequest'));
      // A violation of a field the body did not carry: the server needs it.
      const missing = (bad?.field_violations ?? []).filter(
        (v: { field: string; description: string }) =>
          !carries(sent, v.field) && !path.includes(`{${v.field}}`) && !CONDITIONAL[op.operationId]?.includes(v.field),
      );
      for (const v of missing) problems.push(`${op.operationId} (${method} ${path}): ${v.field} ${v.description}`);
    }
    assert.deepEqual(problems, [], 'fields the server requires that the document does not list in required');
    assert.ok(reached >= 20, `only ${reached} operations reached their service`);
  });

  it('every required query parameter left out is a 400 naming it', async () => {
    let checked = 0;
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const required = (op.parameters ?? []).filter((p: Schema) => p.in === 'query' && p.required);
        const full = Object.fromEntries(required.map((p: Schema) => [p.name, String(fill(p.name, p.schema))]));
        for (const p of required) {
          const { [p.name]: _left, ...without } = full;
          const url = `${concretePath(path)}?${new URLSearchParams(without)}`;
          const res = await stack.api(method.toUpperCase(), url, { key: tenant.key });
          assert.equal(res.status, 400, `${method} ${path} without ${p.name}: ${JSON.stringify(res.body)}`);
          assert.ok(violations(res).includes(p.name), `${method} ${path} without ${p.name}: ${violations(res)}`);
          checked++;
        }
      }
    assert.ok(checked >= 2, 'GET /events: from and to');
  });

  /** Whether a JSON value has the field at `path` (`owner.email`, `stages[1].name`). */
  function carries(value: unknown, path: string): boolean {
    let v: any = value;
    for (const part of path.split(/\.|(?=\[)/)) {
      const index = /^\[(\d+)\]$/.exec(part);
      v = index ? v?.[Number(index[1])] : v?.[part];
      if (v === undefined || v === null) return false;
    }
    return true;
  }

  /** POST and PUT operations whose body has no required field at all (the document says so: check it). */
  function requiredlessCreates() {
    const out: { method: string; path: string; op: any; body: Schema }[] = [];
    for (const [path, ops] of Object.entries(doc.paths))
      for (const method of ['post', 'put']) {
        const op = ops[method];
        const body = op?.requestBody?.content?.['application/json']?.schema;
        if (body && !resolve(nonNull(body)).required?.length) out.push({ method, path, op, body: resolve(body) });
      }
    return out;
  }
});
