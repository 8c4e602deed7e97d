/**
 * Health that tells the truth: when a service loses its database it reports NOT_SERVING, calls
 * that need it answer 503 naming it with a retry hint rather than 500, the gateway stays ready (its
 * other services' routes keep working; /readyz lists the service as down), and everything recovers
 * on its own when the database is back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { databaseUrlFor } from '@workauto/db';
import { eventually } from '@workauto/testing';
import { fails, ok, startTestStack, type TenantFixture, type TestStack } from './harness.js';

describe("readiness is the gateway's own; a service without its database answers 503", () => {
  let stack: TestStack;
  let acme: TenantFixture;
  let admin: pg.Client;

  before(async () => {
    stack = await startTestStack({
      healthCheckMs: 100,
      gatewayOptions: { rateLimitPerMinute: 100_000, authCacheTtlMs: 0 },
    });
    acme = await stack.createTenant('Acme');
    admin = new pg.Client({ connectionString: databaseUrlFor(process.env.TEST_DATABASE_URL!, 'postgres') });
    await admin.connect();
  });
  after(async () => {
    await admin?.end();
    await stack?.stop();
  });

  // /readyz is the gateway's own probe, outside the API's document.
  const ready = async () => {
    const res = await fetch(`${stack.url}/readyz`);
    return { status: res.status, body: (await res.json()) as { services_down: string[] } };
  };

  it('answers 503 naming the service while its database refuses connections, stays ready, and recovers after', async () => {
    const api = stack.client(acme.key);
    assert.equal((await ready()).status, 200);
    const database = new URL(stack.databaseUrl('notes_tasks')).pathname.slice(1);
    await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [database]);
    try {
      await eventually('notes answer 503 and readyz lists notes_tasks as down', async () => {
        const { response, error } = await api.GET('/api/v1/notes');
        if (response.status !== 503) return false;
        assert.equal(error?.error.status, 'UNAVAILABLE');
        assert.match(error.error.message, /retry/);
        const r = await ready();
        assert.equal(r.status, 200, 'one service down never makes the gateway unready');
        return r.body.services_down.includes('notes_tasks');
      });
      const res = await fails(api.GET('/api/v1/notes'), 503, 'SERVICE_UNAVAILABLE');
      assert.equal(res.body.error.details[0].metadata.service, 'notes_tasks');
      await ok(api.GET('/api/v1/members')); // other services keep working
    } finally {
      await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    }
    await eventually('notes answer again', async () => (await api.GET('/api/v1/notes')).response.status === 200);
    await eventually('no service listed as down', async () => (await ready()).body.services_down.length === 0);
  });
});
