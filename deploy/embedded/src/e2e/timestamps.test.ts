/**
 * One RFC 3339 reader for the whole API: an impossible date is a 400 whether the gateway reads it
 * (a google.protobuf.Timestamp field) or a service does (a string field holding a timestamp, like
 * the occurrence of POST /tasks/{id}/complete). V8's Date used to read 2026-02-31 as 3 March.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { captureLogs } from '@workauto/testing';
import { assertError, startTestStack, violations, type TenantFixture, type TestStack } from './harness.js';

describe('timestamps', () => {
  let stack: TestStack;
  let acme: TenantFixture;
  const call = (method: string, path: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key: acme.key, ...(body === undefined ? {} : { body }) });

  before(async () => {
    stack = await startTestStack({ kafkaBrokers: undefined });
    acme = await stack.createTenant('Acme');
  });
  after(() => stack?.stop());

  it('refuses 31 February with a 400 on both paths', async () => {
    const task = await call('POST', '/tasks', { title: 'Daily', due_at: '2026-03-03T10:00:00Z', rrule: 'FREQ=DAILY' });
    assert.equal(task.status, 201, JSON.stringify(task.body));

    const viaGateway = await call('PATCH', `/tasks/${task.body.id}`, { due_at: '2026-02-31T10:00:00Z' });
    assertError(viaGateway, 400);
    assert.deepEqual(violations(viaGateway), ['due_at']);

    const viaService = await call('POST', `/tasks/${task.body.id}/complete`, { occurrence: '2026-02-31T10:00:00Z' });
    assertError(viaService, 400);
    assert.deepEqual(violations(viaService), ['occurrence']);
    assert.equal(
      (await call('GET', `/tasks/${task.body.id}`)).body.due_at,
      '2026-03-03T10:00:00.000000Z',
      'the occurrence was not completed',
    );

    // The same instant written properly still completes it.
    const ok = await call('POST', `/tasks/${task.body.id}/complete`, { occurrence: '2026-03-03T10:00:00Z' });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.due_at, '2026-03-04T10:00:00.000000Z');
  });

  it("answers a client's bad input (a NUL byte, a time no timestamp holds) with a 400 naming the field, logged at warn at most", async () => {
    const logs = captureLogs();
    try {
      for (const [path, body, field] of [
        ['/notes', { title: 'a\u0000b' }, 'title'],
        ['/tasks', { title: 'due', due_at: '+275760-09-13T00:00:00Z' }, 'due_at'],
        ['/tasks', { title: 'x\u0000' }, 'title'],
      ] as const) {
        const res = await call('POST', path, body);
        assertError(res, 400);
        assert.deepEqual(violations(res), [field], JSON.stringify(res.body));
      }
    } finally {
      logs.stop();
    }
    const errors = logs.lines.filter((l) => /"level":"(error|fatal)"/.test(l));
    assert.deepEqual(errors, [], 'nothing a client sent is logged as an error of ours');
  });
});
