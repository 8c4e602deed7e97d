/**
 * One RFC 3339 reader for the whole API: an impossible date is a 400 whether the gateway reads it
 * (a google.protobuf.Timestamp field) or a service does (a string field holding a timestamp, like
 * the occurrence of POST /tasks/{id}/complete). V8's Date used to read 2026-02-31 as 3 March.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { captureLogs } from '@workauto/testing';
import { fails, ok, startTestStack, violations, type TenantFixture, type TestStack } from './harness.js';

describe('timestamps', () => {
  let stack: TestStack;
  let acme: TenantFixture;

  before(async () => {
    stack = await startTestStack({ kafkaBrokers: undefined });
    acme = await stack.createTenant('Acme');
  });
  after(() => stack?.stop());

  it('refuses 31 February with a 400 on both paths', async () => {
    const api = stack.client(acme.key);
    const task = await ok(
      api.POST('/api/v1/tasks', { body: { title: 'Daily', due_at: '2026-03-03T10:00:00Z', rrule: 'FREQ=DAILY' } }),
      201,
    );
    const byId = { params: { path: { id: task.id } } };

    const viaGateway = await fails(
      api.PATCH('/api/v1/tasks/{id}', { ...byId, body: { due_at: '2026-02-31T10:00:00Z' } }),
      400,
    );
    assert.deepEqual(violations(viaGateway), ['due_at']);

    const viaService = await fails(
      api.POST('/api/v1/tasks/{id}/complete', { ...byId, body: { occurrence: '2026-02-31T10:00:00Z' } }),
      400,
    );
    assert.deepEqual(violations(viaService), ['occurrence']);
    assert.equal(
      (await ok(api.GET('/api/v1/tasks/{id}', byId))).due_at,
      '2026-03-03T10:00:00.000000Z',
      'the occurrence was not completed',
    );

    // The same instant written properly still completes it.
    const completed = await ok(
      api.POST('/api/v1/tasks/{id}/complete', { ...byId, body: { occurrence: '2026-03-03T10:00:00Z' } }),
    );
    assert.equal(completed.due_at, '2026-03-04T10:00:00.000000Z');
  });

  it("answers a client's bad input (a NUL byte, a time no timestamp holds) with a 400 naming the field, logged at warn at most", async () => {
    const api = stack.client(acme.key);
    const logs = captureLogs();
    try {
      for (const [call, field] of [
        [() => api.POST('/api/v1/notes', { body: { title: 'a\u0000b' } }), 'title'],
        [() => api.POST('/api/v1/tasks', { body: { title: 'due', due_at: '+275760-09-13T00:00:00Z' } }), 'due_at'],
        [() => api.POST('/api/v1/tasks', { body: { title: 'x\u0000' } }), 'title'],
      ] as const) {
        const res = await fails(call(), 400);
        assert.deepEqual(violations(res), [field], JSON.stringify(res.body));
      }
    } finally {
      logs.stop();
    }
    const errors = logs.lines.filter((l) => /"level":"(error|fatal)"/.test(l));
    assert.deepEqual(errors, [], 'nothing a client sent is logged as an error of ours');
  });
});
