/**
 * PATCH semantics across services (AIP-134 with JSON merge-patch nulls): the gateway fills
 * update_mask from the body's keys; a key with null clears its field, a field that cannot be
 * empty answers 400, and update_mask itself is not part of the JSON API. Through the typed client,
 * except the bodies it would not let a client send.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ok, startTestStack, type TenantFixture, type TestStack } from './harness.js';

describe('PATCH with null', () => {
  let stack: TestStack;
  let acme: TenantFixture;
  const api = (method: string, path: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key: acme.key, ...(body !== undefined ? { body } : {}) });

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 100_000 } });
    acme = await stack.createTenant('Acme');
  });
  after(() => stack?.stop());

  it('clears a task’s timestamp, number and text fields, and keeps what the body leaves out', async () => {
    const client = stack.client(acme.key);
    const task = await ok(
      client.POST('/api/v1/tasks', {
        body: { title: 'Ship', description: 'soon', due_at: '2026-12-01T09:00:00Z', estimation_minutes: 30 },
      }),
      201,
    );
    const patched = await ok(
      client.PATCH('/api/v1/tasks/{id}', {
        params: { path: { id: task.id } },
        body: { due_at: null, estimation_minutes: null, description: null },
      }),
    );
    assert.equal(patched.due_at, null);
    assert.equal(patched.estimation_minutes, null);
    assert.equal(patched.description, null);
    assert.equal(patched.title, 'Ship', 'a field the body leaves out is kept');
  });

  it('clears a deal’s confidence so the stage default applies again', async () => {
    const client = stack.client(acme.key);
    const pipeline = await ok(
      client.POST('/api/v1/pipelines', {
        body: { name: 'Sales', stages: [{ name: 'Lead', stage_type: 'open', default_confidence: 0.25 }] },
      }),
      201,
    );
    const deal = await ok(
      client.POST('/api/v1/deals', { body: { title: 'Big', pipeline_id: pipeline.id, amount: 1000, confidence: 0.9 } }),
      201,
    );
    assert.equal(deal.confidence, 0.9);
    const patched = await ok(
      client.PATCH('/api/v1/deals/{id}', { params: { path: { id: deal.id } }, body: { confidence: null } }),
    );
    assert.equal(patched.confidence, null);
    const summary = await ok(client.GET('/api/v1/pipelines/{id}/summary', { params: { path: { id: pipeline.id } } }));
    assert.equal(summary.weighted_value, 250, 'the stage default (0.25) weighs the deal now');
  });

  it('clears text of notes, contacts and members the same way', async () => {
    const client = stack.client(acme.key);
    const note = await ok(
      client.POST('/api/v1/notes', { body: { title: 'Plan', source_url: 'https://example.com/plan' } }),
      201,
    );
    const notePatch = { params: { path: { id: note.id } }, body: { source_url: null } };
    assert.equal((await ok(client.PATCH('/api/v1/notes/{id}', notePatch))).source_url, null);
    const contact = await ok(client.POST('/api/v1/contacts', { body: { name: 'Ada', company: 'Engines Ltd' } }), 201);
    const contactPatch = { params: { path: { id: contact.id } }, body: { company: null } };
    assert.equal((await ok(client.PATCH('/api/v1/contacts/{id}', contactPatch))).company, null);
    const owner = { params: { path: { id: acme.ownerId } } };
    assert.equal(
      (await ok(client.PATCH('/api/v1/members/{id}', { ...owner, body: { contact_id: contact.id } }))).contact_id,
      contact.id,
    );
    assert.equal(
      (await ok(client.PATCH('/api/v1/members/{id}', { ...owner, body: { contact_id: null } }))).contact_id,
      null,
    );
  });

  it('answers 400 for null on a field that cannot be empty, and for update_mask in the body', async () => {
    const task = await api('POST', '/tasks', { title: 'Keep me' });
    for (const [path, body, field] of [
      [`/tasks/${task.body.id}`, { title: null }, 'title'],
      [`/members/${acme.ownerId}`, { name: null }, 'name'],
      [`/tasks/${task.body.id}`, { update_mask: 'title' }, 'update_mask'],
    ] as const) {
      const res = await api('PATCH', path, body);
      assert.equal(res.status, 400, `${path} ${JSON.stringify(body)}: ${res.status}`);
      const fields = res.body.error.details[1].field_violations.map((v: { field: string }) => v.field);
      assert.ok(fields.includes(field), `${JSON.stringify(body)} → ${fields.join(', ')}`);
    }
    assert.equal((await api('GET', `/tasks/${task.body.id}`)).body.title, 'Keep me');
  });

  it('leaves update_mask out of the OpenAPI request bodies', async () => {
    const doc = (await stack.api('GET', '/api/v1/openapi.json')).body;
    assert.ok(JSON.stringify(doc).length > 10_000);
    assert.ok(!JSON.stringify(doc).includes('update_mask'));
  });
});
