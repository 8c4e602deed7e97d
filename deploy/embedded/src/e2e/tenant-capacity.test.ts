/**
 * What one tenant takes of a gateway, through the gateway (docs/operations.md, "Fairness between
 * tenants"): a feed read by its token is admitted under its calendar's tenant like a request with a
 * key; each tenant holds at most GATEWAY_TENANT_STREAMS streamed bodies at once; a client that
 * reads nothing is disconnected after STREAM_IDLE_TIMEOUT_MS, which frees what it held; heavy
 * writes (large bodies, recurring series) cost more of the tenant's budget per minute; and every
 * answer says how it may be cached and that its type is not to be sniffed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient, type WorkautoClient } from '@workauto/client';
import { createGateway, type Gateway, type GatewayOptions } from '@workauto/gateway';
import { createLogger } from '@workauto/logger';
import { eventually, stalledRequest } from '@workauto/testing';
import { Keyring } from '@workauto/crypto';
import { generateCallerKeys } from '@workauto/grpc';
import {
  answer,
  assertError,
  fails,
  ok,
  startTestStack,
  type TenantFixture,
  type TestStack,
  E2E_DEADLINE_MS,
} from './harness.js';

const IDLE_MS = 1_500;

describe("a tenant's capacity at the gateway", () => {
  const encryptionKeys = Keyring.generateSpec();
  const callerKeys = generateCallerKeys('gateway');
  let stack: TestStack;
  let a: TenantFixture;
  let b: TenantFixture;
  let aCalendar: string;
  let aFeed: string;
  let bFeed: string;
  /** A second gateway on the same services: two streamed bodies per tenant, the default in-flight cap. */
  let slotsGateway: { gateway: Gateway; url: string };
  const stalled: { close(): void }[] = [];

  /** A feed request from a client that reads nothing after the answer's first bytes. */
  function stalledRead(base: string, pathAndQuery: string) {
    const request = stalledRequest(`${base}${pathAndQuery}`);
    stalled.push(request);
    return request;
  }

  /** Another gateway on the stack's services, with these settings. */
  async function gatewayWith(options: Partial<GatewayOptions>): Promise<{ gateway: Gateway; url: string }> {
    const gateway = await createGateway({
      logger: createLogger('gateway', 'silent'),
      databaseUrl: stack.databaseUrl('gateway'),
      encryptionKeys,
      deadlineMs: E2E_DEADLINE_MS,
      callerSigningKey: callerKeys.signingKey,
      downstreams: Object.fromEntries(Object.entries(stack.services).map(([n, s]) => [n, `127.0.0.1:${s.port}`])),
      ...options,
    });
    return { gateway, url: `http://127.0.0.1:${await gateway.listen('127.0.0.1', 0)}` };
  }

  before(async () => {
    stack = await startTestStack({
      kafkaBrokers: undefined,
      encryptionKeys,
      callerKeys,
      gatewayOptions: { tenantConcurrency: 2, streamIdleTimeoutMs: IDLE_MS },
    });
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
    slotsGateway = await gatewayWith({ tenantStreams: 2, streamIdleTimeoutMs: IDLE_MS });
    // Made through the second gateway, which takes the default 128 requests of a tenant at once.
    // As a client of the API does: a 429 is tried again after its Retry-After (large writes are paced).
    const paced = async <T>(call: () => Promise<{ data?: T; error?: unknown; response: Response }>) => {
      for (;;) {
        const r = await call();
        if (r.response.status !== 429) return r;
        await sleep(Number(r.response.headers.get('retry-after') ?? 1) * 1_000);
      }
    };
    const feedOf = async (key: string, events: number) => {
      const api = createClient({ baseUrl: slotsGateway.url, apiKey: key });
      const { id } = await ok(
        paced(() => api.POST('/api/v1/calendars', { body: { name: 'big', timezone: 'UTC' } })),
        201,
      );
      // 60 KB each: the feed (7 MB) is more than the kernel's socket buffers take from a client that
      // reads nothing (about 4 MB on loopback), so the gateway's writes wait for it.
      const description = '語'.repeat(20_000);
      for (let i = 0; i < events; i += 20)
        await Promise.all(
          Array.from({ length: Math.min(20, events - i) }, (_, j) =>
            ok(
              paced(() =>
                api.POST('/api/v1/events', {
                  body: {
                    calendar_id: id,
                    title: `E ${i + j}`,
                    description,
                    start_at: `2027-01-${String(((i + j) % 28) + 1).padStart(2, '0')}T09:00:00Z`,
                    end_at: `2027-01-${String(((i + j) % 28) + 1).padStart(2, '0')}T10:00:00Z`,
                  },
                }),
              ),
              201,
            ),
          ),
        );
      const token = await ok(
        paced(() => api.POST('/api/v1/calendars/{id}/feed-token', { params: { path: { id } } })),
        201,
      );
      const url = new URL(token.feed_url);
      return { id, pathAndQuery: `${url.pathname}${url.search}` };
    };
    const big = await feedOf(a.key, 120);
    aCalendar = big.id;
    aFeed = big.pathAndQuery;
    bFeed = (await feedOf(b.key, 1)).pathAndQuery;
  });
  after(async () => {
    for (const s of stalled) s.close();
    await slotsGateway?.gateway.close();
    await stack?.stop();
  });

  it("admits a feed read by its token under the calendar's tenant: its requests in flight count, the other tenant's do not", async () => {
    // The tenant may have 2 requests in flight: two feed reads that stall hold both.
    const held = [stalledRead(stack.url, aFeed), stalledRead(stack.url, aFeed)];
    assert.deepEqual(await Promise.all(held.map((h) => h.status)), [200, 200]);
    const third = await fetch(`${stack.url}${aFeed}`);
    assertError(
      { status: third.status, headers: third.headers, body: await third.json() },
      429,
      'TENANT_CONCURRENCY_LIMITED',
    );
    await fails(stack.client(a.key).GET('/api/v1/calendars'), 429, 'TENANT_CONCURRENCY_LIMITED');
    await ok(stack.client(b.key).GET('/api/v1/calendars')); // the other tenant is served
    assert.equal(await fetch(`${stack.url}${bFeed}`).then(async (r) => (await r.text(), r.status)), 200);

    // Neither reads: each is disconnected after the idle timeout, which gives the tenant its slots back.
    await eventually(
      'the tenant is served again',
      async () => (await stack.client(a.key).GET('/api/v1/calendars')).response.status === 200,
    );
  });

  it('holds a stream slot per streamed body: past GATEWAY_TENANT_STREAMS a 429 with Retry-After, for tokens and keys alike', async () => {
    const held = [stalledRead(slotsGateway.url, aFeed), stalledRead(slotsGateway.url, aFeed)];
    assert.deepEqual(await Promise.all(held.map((h) => h.status)), [200, 200]);
    // Raw: the streamed bodies (the .ics feed, by its token and by a key, and the audit export).
    for (const res of [
      await fetch(`${slotsGateway.url}${aFeed}`),
      await fetch(`${slotsGateway.url}/api/v1/calendars/${aCalendar}/events.ics`, {
        headers: { authorization: `Bearer ${a.key}` },
      }),
      await fetch(`${slotsGateway.url}/api/v1/audit-log/export?format=ndjson`, {
        headers: { authorization: `Bearer ${a.key}` },
      }),
    ]) {
      const body = await res.json();
      assertError({ status: res.status, headers: res.headers, body }, 429, 'TENANT_STREAMS_LIMITED');
      assert.equal(res.headers.get('retry-after'), '5');
      assert.match(body.error.message, /this tenant has 2 streamed responses .* open on this gateway/);
    }
    // Another tenant's stream, and the tenant's ordinary requests, are served meanwhile.
    const bRes = await fetch(`${slotsGateway.url}${bFeed}`);
    assert.equal(bRes.status, 200);
    await bRes.text();
    await ok(createClient({ baseUrl: slotsGateway.url, apiKey: a.key }).GET('/api/v1/calendars'));
    await eventually('a slot is free again', async () => {
      const res = await fetch(`${slotsGateway.url}${aFeed}`);
      await res.arrayBuffer();
      return res.status === 200;
    });
  });

  it("charges heavy writes more of the tenant's budget per minute: large bodies by their size, recurring series by their expansion", async () => {
    // 240 a minute: 102 units of heavy work at once (two series' worth), then 4 a second.
    const { gateway: costly, url } = await gatewayWith({ tenantRateLimitPerMinute: 240 });
    const through = (key: string): WorkautoClient => createClient({ baseUrl: url, apiKey: key });
    try {
      // Tenants of their own: the budget is counted across gateways (this one shares the stack's
      // database), so the earlier tests' requests of A and B this minute would count too.
      const [small1, large1] = [await stack.createTenant('Small writes'), await stack.createTenant('Large writes')];
      // 40 small writes at once fit the budget.
      const small = [];
      const smallWriter = through(small1.key);
      for (let i = 0; i < 40; i++)
        small.push((await smallWriter.POST('/api/v1/notes', { body: { title: `small ${i}` } })).response.status);
      assert.deepEqual([...new Set(small)], [201]);
      // Notes of 90 KB cost 1 + 10 units (a unit per started 8 KiB past the first): 10 of 25 sent at
      // once fit the 102 units of heavy work a tenant may spend at once.
      const largeWriter = through(large1.key);
      const large = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          answer(largeWriter.POST('/api/v1/notes', { body: { title: `large ${i}`, body: 'x'.repeat(90_000) } })),
        ),
      );
      const passed = large.filter((r) => r.status === 201).length;
      assert.ok(passed >= 10 && passed <= 11, `${passed} of 25 large writes at once passed, where 40 small ones did`);
      for (const r of large.filter((x) => x.status !== 201)) assertError(r, 429, 'TENANT_RATE_LIMITED');
      // A recurring series costs 51 units: of three sent at once, two fit.
      const gamma = through((await stack.createTenant('Gamma')).key);
      const calendar = (await ok(gamma.POST('/api/v1/calendars', { body: { name: 'c', timezone: 'UTC' } }), 201)).id;
      const series = await Promise.all(
        ['FREQ=DAILY;UNTIL=29991231T000000Z', 'FREQ=WEEKLY', 'FREQ=MONTHLY'].map((rrule) =>
          gamma.POST('/api/v1/events', {
            body: {
              calendar_id: calendar,
              title: 'standup',
              start_at: '2027-01-04T09:00:00Z',
              end_at: '2027-01-04T09:15:00Z',
              rrule,
            },
          }),
        ),
      );
      assert.deepEqual(series.map((r) => r.response.status).sort(), [201, 201, 429]);
    } finally {
      await costly.close();
    }
  });

  it('marks every answer nosniff and no-store, the calendar feed private for 5 minutes', async () => {
    // Raw: exact header checks, of a feed, an export, a request without a key and a path that does not exist.
    const feed = await fetch(`${stack.url}${bFeed}`);
    await feed.text();
    assert.equal(feed.headers.get('cache-control'), 'private, max-age=300');
    assert.equal(feed.headers.get('x-content-type-options'), 'nosniff');
    for (const res of [
      await fetch(`${stack.url}/api/v1/calendars`, { headers: { authorization: `Bearer ${b.key}` } }),
      await fetch(`${stack.url}/api/v1/audit-log/export?format=csv`, { headers: { authorization: `Bearer ${b.key}` } }),
      await fetch(`${stack.url}/api/v1/calendars`),
      await fetch(`${stack.url}/api/v1/nowhere`, { headers: { authorization: `Bearer ${b.key}` } }),
    ]) {
      await res.arrayBuffer();
      assert.deepEqual(
        [res.headers.get('cache-control'), res.headers.get('x-content-type-options')],
        ['no-store', 'nosniff'],
        `${res.url} ${res.status}`,
      );
    }
  });
});
