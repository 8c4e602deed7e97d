/**
 * PATCH semantics across services (AIP-134 with JSON merge-patch nulls): the gateway fills
 * update_mask from the body's keys; a key with null clears its field, a field that cannot be
 * empty answers 400, and update_mask itself is not part of the JSON API.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestStack, type TenantFixture, type TestStack } from './harness.js';

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
    const task = await api('POST', '/tasks', {
      title: 'Ship',
      description: 'soon',
      due_at: '2026-12-01T09:00:00Z',
      estimation_minutes: 30,
    });
    assert.equal(task.status, 201);
    const patched = await api('PATCH', `/tasks/${task.body.id}`, {
      due_at: null,
      estimation_minutes: null,
      description: null,
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.due_at, null);
    assert.equal(patched.body.estimation_minutes, null);
    assert.equal(patched.body.description, null);
    assert.equal(patched.body.title, 'Ship', 'a field the body leaves out is kept');
  });

  it('clears a deal’s confidence so the stage default applies again', async () => {
    const pipeline = await api('POST', '/pipelines', {
      name: 'Sales',
      stages: [{ name: 'Lead', stage_type: 'open', default_confidence: 0.25 }],
    });
    const deal = await api('POST', '/deals', {
      title: 'Big',
      pipeline_id: pipeline.body.id,
      amount: 1000,
      confidence: 0.9,
    });
    assert.equal(deal.body.confidence, 0.9);
    const patched = await api('PATCH', `/deals/${deal.body.id}`, { confidence: null });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.confidence, null);
    const summary = await api('GET', `/pipelines/${pipeline.body.id}/summary`);
    assert.equal(summary.body.weighted_value, 250, 'the stage default (0.25) weighs the deal now');
  });

  it('clears text of notes, contacts and members the same way', async () => {
    const note = await api('POST', '/notes', { title: 'Plan', source_url: 'https://example.com/plan' });
    assert.equal((await api('PATCH', `/notes/${note.body.id}`, { source_url: null })).body.source_url, null);
    const contact = await api('POST', '/contacts', { name: 'Ada', company: 'Engines Ltd' });
    assert.equal((await api('PATCH', `/contacts/${contact.body.id}`, { company: null })).body.company, null);
    const owner = await api('PATCH', `/members/${acme.ownerId}`, { contact_id: contact.body.id });
    assert.equal(owner.body.contact_id, contact.body.id);
    assert.equal((await api('PATCH', `/members/${acme.ownerId}`, { contact_id: null })).body.contact_id, null);
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
