/**
 * Health that tells the truth: when a service loses its database it reports NOT_SERVING (so the
 * gateway's /readyz is 503 and names it), calls that need it answer 503 with a retry hint rather
 * than 500, and everything recovers on its own when the database is back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { databaseUrlFor } from '@workauto/db';
import { startTestStack, type TenantFixture, type TestStack } from './harness.js';

async function eventually(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(100);
  }
}

describe('readiness follows the databases', () => {
  let stack: TestStack;
  let acme: TenantFixture;
  let admin: pg.Client;

  before(async () => {
    stack = await startTestStack({ healthCheckMs: 100, gatewayOptions: { rateLimitPerMinute: 100_000, authCacheTtlMs: 0 } });
    acme = await stack.createTenant('Acme');
    admin = new pg.Client({ connectionString: databaseUrlFor(process.env.TEST_DATABASE_URL!, 'postgres') });
    await admin.connect();
  });
  after(async () => {
    await admin?.end();
    await stack?.stop();
  });

  const ready = async () => {
    const res = await fetch(`${stack.url}/readyz`);
    return { status: res.status, body: (await res.json()) as { not_ready: string[] } };
  };

  it('is 503 naming the service while its database refuses connections, and ready again after', async () => {
    assert.equal((await ready()).status, 200);
    const database = new URL(stack.databaseUrl('notes_tasks')).pathname.slice(1);
    await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [database]);
    try {
      await eventually('readyz names notes_tasks', async () => {
        const r = await ready();
        return r.status === 503 && r.body.not_ready.includes('notes_tasks');
      });
      const res = await stack.api('GET', '/api/v1/notes', { key: acme.key });
      assert.equal(res.status, 503, JSON.stringify(res.body));
      assert.equal(res.body.error.status, 'UNAVAILABLE');
      assert.match(res.body.error.message, /retry/);
      assert.equal((await stack.api('GET', '/api/v1/members', { key: acme.key })).status, 200, 'other services keep working');
    } finally {
      await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    }
    await eventually('ready again', async () => (await ready()).status === 200);
    await eventually('notes answer again', async () => (await stack.api('GET', '/api/v1/notes', { key: acme.key })).status === 200);
  });
});
