/**
 * The cap on endpoints per tenant (WEBHOOK_MAX_ENDPOINTS) against real PostgreSQL: refused with
 * 409 and nothing written, freed by a delete, per tenant, and held when creates race.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { failure, S, startWebhooks, tenant } from './test-support.js';

type Webhooks = Awaited<ReturnType<typeof startWebhooks>>;
type Tenant = ReturnType<typeof tenant>;

const CAP = 3;
const URL = 'https://receiver.example.com/hooks';

describe('the cap on webhook endpoints per tenant', () => {
  let w: Webhooks;
  before(async () => {
    w = await startWebhooks({ settings: { maxEndpoints: CAP } });
  });
  after(async () => {
    await w.stop();
  });

  const create = (t: Tenant, description = 'an endpoint') =>
    w.client.call(S.createWebhookEndpoint, { url: URL, description, event_types: [], channels: [] }, t.call);
  /** What the tenant has stored: live endpoints, their secrets, and the webhook_endpoint.created events in the outbox. */
  async function stored(t: Tenant) {
    const {
      rows: [row],
    } = await w.db.query<{ endpoints: number; secrets: number; created: number }>(
      `SELECT (SELECT count(*)::int FROM webhook_endpoints WHERE tenant_id = $1 AND deleted_at IS NULL) AS endpoints,
              (SELECT count(*)::int FROM webhook_endpoint_secrets WHERE tenant_id = $1) AS secrets,
              (SELECT count(*)::int FROM outbox WHERE tenant_id = $1 AND event_type = 'webhook_endpoint.created') AS created`,
      [t.id],
    );
    return row!;
  }
  const assertLimitReached = (err: Awaited<ReturnType<typeof failure>>) => {
    assert.equal(
      err.code,
      grpc.status.FAILED_PRECONDITION,
      `expected FAILED_PRECONDITION, got ${grpc.status[err.code]}: ${err.message}`,
    );
    assert.equal(err.httpStatus, 409);
    assert.equal(err.reason, 'WEBHOOK_ENDPOINT_LIMIT_REACHED');
    assert.match(err.message, new RegExp(`\\b${CAP}\\b`), 'the message says the cap');
    assert.match(err.message, /DELETE \/api\/v1\/webhook-endpoints\/\{id\}/, 'and how to free a place');
    assert.match(err.message, /WEBHOOK_MAX_ENDPOINTS/, 'and how to raise it when self-hosting');
  };

  it('refuses a create past the cap with 409 WEBHOOK_ENDPOINT_LIMIT_REACHED (disabled endpoints count), writing nothing', async () => {
    const t = tenant();
    const made = [];
    for (let i = 0; i < CAP; i++) made.push(await create(t));
    await w.client.call(
      S.updateWebhookEndpoint,
      { id: made[0]!.id, is_enabled: false, event_types: [], channels: [], update_mask: ['is_enabled'] },
      t.call,
    );
    const before = await stored(t);
    assert.deepEqual(before, { endpoints: CAP, secrets: CAP, created: CAP });

    assertLimitReached(await failure(create(t, 'one too many')));
    assert.deepEqual(await stored(t), before, 'no endpoint, secret or event written');
    assert.equal((await w.client.call(S.listWebhookEndpoints, {}, t.call)).data.length, CAP);
  });

  it('lets a create succeed again once an endpoint is deleted, and leaves other tenants unaffected', async () => {
    const t = tenant();
    const made = [];
    for (let i = 0; i < CAP; i++) made.push(await create(t));
    assertLimitReached(await failure(create(t)));

    const other = tenant();
    for (let i = 0; i < CAP; i++) await create(other);
    assert.equal((await stored(other)).endpoints, CAP, 'another tenant fills its own cap');

    await w.client.call(S.deleteWebhookEndpoint, { id: made[1]!.id }, t.call);
    const again = await create(t, 'after a delete');
    assert.equal(again.description, 'after a delete');
    assert.equal((await stored(t)).endpoints, CAP);
    assertLimitReached(await failure(create(t)));
  });

  it('holds under concurrency: of parallel creates at cap − 1, exactly one succeeds (for each of several tenants at once)', async () => {
    const tenants = Array.from({ length: 4 }, () => tenant());
    for (const t of tenants) for (let i = 0; i < CAP - 1; i++) await create(t);
    const outcomes = await Promise.all(
      tenants.map((t) => Promise.allSettled(Array.from({ length: 8 }, (_, i) => create(t, `racer ${i}`)))),
    );
    for (const [n, t] of tenants.entries()) {
      const won = outcomes[n]!.filter((o) => o.status === 'fulfilled');
      assert.equal(won.length, 1, `exactly one of 8 racing creates succeeded (${won.length} did)`);
      for (const o of outcomes[n]!)
        if (o.status === 'rejected') assertLimitReached(await failure(Promise.reject(o.reason)));
      assert.deepEqual(await stored(t), { endpoints: CAP, secrets: CAP, created: CAP });
    }
  });
});
