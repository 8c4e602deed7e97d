/**
 * Webhooks end to end through the gateway: every endpoint, a change made through the API reaching a
 * receiver signed (checked with node:crypto) with data equal to the GET body, the filters, the role
 * matrix and tenant isolation. Real Kafka when the run has one (make test), real HTTP receivers.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { signedBy, startReceiver, type Received, type Receiver } from '@workauto/webhooks/testing';
import { eventually } from '@workauto/testing';
import {
  assertError,
  assertRecord,
  startTestStack,
  violations,
  type TenantFixture,
  type TestStack,
} from './harness.js';

/** WEBHOOK_MAX_ENDPOINTS of this stack: above what Acme's tests create, small enough to reach. */
const MAX_ENDPOINTS = 25;

describe('webhooks through the gateway', () => {
  let stack: TestStack;
  let acme: TenantFixture;
  let other: TenantFixture;
  const receivers: Receiver[] = [];
  const receiver = async (answer?: Receiver['answer']) => {
    const r = await startReceiver(answer);
    receivers.push(r);
    return r;
  };
  const call = (method: string, path: string, body?: unknown, key = acme.key) =>
    stack.api(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) });
  /** The requests whose body has this type (the receiver also gets the tenant's other events). */
  const ofType = (r: Receiver, type: string | RegExp) =>
    r.received.filter((x) =>
      typeof type === 'string' ? JSON.parse(x.body).type === type : type.test(JSON.parse(x.body).type),
    );
  const arrival = (r: Receiver, match: (x: Received) => boolean, ms = 15_000): Promise<Received> =>
    eventually(
      () => `a matching delivery; got ${r.received.map((x) => JSON.parse(x.body).type).join(', ')}`,
      () => r.received.find(match),
      ms,
    );
  const about = (type: string, id: string) => (x: Received) => {
    const b = JSON.parse(x.body);
    return b.type === type && b.data?.id === id;
  };

  before(async () => {
    stack = await startTestStack({
      webhooks: { settings: { retrySchedule: [0, 500, 1_000], timeoutMs: 8_000, maxEndpoints: MAX_ENDPOINTS } },
    });
    acme = await stack.createTenant('Acme');
    other = await stack.createTenant('Other');
  });
  after(async () => {
    for (const r of receivers) await r.close();
    await stack?.stop();
  });

  it('serves every endpoint: create (secret once), list, get, patch, rotate, test, event types, events, retry, delete', async () => {
    const r = await receiver();
    const created = await call('POST', '/webhook-endpoints', {
      url: r.url,
      description: 'CRM sync',
      event_types: ['note.created', 'deal.*'],
      channels: ['deal'],
      metadata: { team: 'x' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const ep = created.body;
    assertRecord(
      ep,
      {
        id: 'uuid',
        tenant_id: 'uuid',
        url: 'string',
        is_enabled: 'boolean',
        event_types: 'array',
        channels: 'array',
        metadata: 'object',
        created_at: 'date-time',
        updated_at: 'date-time',
        signing_secret: 'string',
      },
      'endpoint',
    );
    assert.match(ep.signing_secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(ep.tenant_id, acme.id);
    assert.equal(ep.is_enabled, true);

    const got = await call('GET', `/webhook-endpoints/${ep.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.signing_secret ?? null, null, 'the secret is shown only on create and rotate');
    assert.deepEqual(
      { ...got.body, signing_secret: undefined },
      { ...ep, signing_secret: undefined, ...(got.body.signing_secret === null ? {} : {}) },
    );
    const list = await call('GET', '/webhook-endpoints?limit=1');
    assert.equal(list.status, 200);
    assert.equal(list.body.data.length, 1);
    assert.equal(typeof list.body.has_more, 'boolean');
    assert.ok(list.body.data.every((e: { signing_secret?: string | null }) => !e.signing_secret));

    const patched = await call('PATCH', `/webhook-endpoints/${ep.id}`, {
      description: null,
      event_types: ['note.*'],
      channels: null,
      is_enabled: false,
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.description ?? null, null);
    assert.deepEqual(patched.body.event_types, ['note.*']);
    assert.deepEqual(patched.body.channels, []);
    assert.equal(patched.body.is_enabled, false);
    assert.equal(patched.body.disabled_reason, 'disabled by a user');
    assert.ok(patched.body.disabled_at);
    const enabled = await call('PATCH', `/webhook-endpoints/${ep.id}`, { is_enabled: true });
    assert.equal(enabled.body.disabled_at ?? null, null);
    assert.equal(enabled.body.disabled_reason ?? null, null);
    assert.deepEqual(enabled.body.event_types, ['note.*'], 'fields left out keep their values');

    const rotatedAt = Date.now();
    const rotated = await call('POST', `/webhook-endpoints/${ep.id}/rotate-secret`, {});
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    assert.notEqual(rotated.body.signing_secret, ep.signing_secret);
    // When the previous secret stops signing: the grace (24 h) after the rotation.
    const expires = Date.parse(rotated.body.previous_secret_expires_at);
    assert.ok(
      Math.abs(expires - rotatedAt - 24 * 3_600_000) < 60_000,
      `previous_secret_expires_at ${rotated.body.previous_secret_expires_at}`,
    );
    assert.equal(got.body.previous_secret_expires_at ?? null, null, 'only the rotation says it');

    const tested = await call('POST', `/webhook-endpoints/${ep.id}/test`, {});
    assert.equal(tested.status, 200, JSON.stringify(tested.body));
    assert.equal(tested.body.success, true);
    assert.equal(tested.body.http_status, 200);
    const testDelivery = await arrival(r, (x) => JSON.parse(x.body).type === 'webhook.test');
    assert.ok(
      signedBy(testDelivery, rotated.body.signing_secret) && signedBy(testDelivery, ep.signing_secret),
      'both secrets during the grace',
    );
    const product = JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    assert.equal(testDelivery.headers['user-agent'], `workauto-webhooks/${product.version}`);

    const types = await call('GET', '/webhook-event-types');
    assert.equal(types.status, 200);
    assert.ok(Array.isArray(types.body), 'a bare array');
    for (const name of ['note.created', 'deal.stage_changed', 'member.updated', 'webhook_endpoint.disabled'])
      assert.ok(
        types.body.some((t: { name: string }) => t.name === name),
        name,
      );

    const note = (await call('POST', '/notes', { title: 'Hello', body: 'world' })).body;
    const delivered = await arrival(r, about('note.created', note.id));
    const events = await call('GET', `/webhook-events?event_type=note.created&endpoint_id=${ep.id}`);
    assert.equal(events.status, 200);
    const event = events.body.data.find((e: { id: string }) => e.id === delivered.headers['webhook-id']);
    assertRecord(
      event,
      {
        id: 'uuid',
        tenant_id: 'uuid',
        event_type: 'string',
        channels: 'array',
        payload: 'object',
        status: 'string',
        created_at: 'date-time',
        updated_at: 'date-time',
      },
      'webhook event',
    );
    assert.deepEqual(event.payload, JSON.parse(delivered.body));
    assert.deepEqual(event.channels, ['note']);
    // The receiver has the request a moment before the attempt is recorded.
    const detail = await eventually('the delivery is recorded', async () => {
      const res = await call('GET', `/webhook-events/${event.id}`);
      return res.body.status === 'delivered' && res;
    });
    assert.equal(detail.status, 200);
    assert.equal(detail.body.status, 'delivered');
    assert.equal(detail.body.deliveries[0].endpoint_id, ep.id);
    assert.equal(typeof detail.body.deliveries[0].attempt_count, 'number');
    assert.equal(detail.body.deliveries[0].attempts[0].trigger, 'scheduled');
    const retried = await call('POST', `/webhook-events/${event.id}/retry`, {});
    assert.equal(retried.status, 200);
    assert.deepEqual(retried.body, { requeued: 0 });
    assert.equal((await call('GET', '/webhook-events?status=bogus')).status, 400);

    const deleted = await call('DELETE', `/webhook-endpoints/${ep.id}`);
    assert.equal(deleted.status, 204);
    assertError(await call('GET', `/webhook-endpoints/${ep.id}`), 404);
  });

  it('refuses bad input with 400s that name the field', async () => {
    const noUrl = await call('POST', '/webhook-endpoints', {});
    assertError(noUrl, 400);
    assert.deepEqual(violations(noUrl), ['url']);
    const badType = await call('POST', '/webhook-endpoints', {
      url: 'https://hooks.example.com/x',
      event_types: ['note.created', 'note.exploded'],
    });
    assertError(badType, 400);
    assert.deepEqual(violations(badType), ['event_types[1]']);
    const badChannel = await call('POST', '/webhook-endpoints', {
      url: 'https://hooks.example.com/x',
      channels: ['Pipeline x'],
    });
    assert.deepEqual(violations(badChannel), ['channels[0]']);
    const userinfo = await call('POST', '/webhook-endpoints', { url: 'https://u:p@hooks.example.com/x' });
    assert.deepEqual(violations(userinfo), ['url']);
  });

  it('delivers a change made through the API, signed, with data equal to the GET body, to the matching endpoints only', async () => {
    const [all, notes, deals, pipelineCh, both] = await Promise.all([
      receiver(),
      receiver(),
      receiver(),
      receiver(),
      receiver(),
    ]);
    const pipeline = (
      await call('POST', '/pipelines', {
        name: 'Sales',
        stages: [
          { name: 'Lead', stage_type: 'open' },
          { name: 'Won', stage_type: 'won' },
        ],
      })
    ).body;
    const otherPipeline = (
      await call('POST', '/pipelines', { name: 'Other', stages: [{ name: 'Lead', stage_type: 'open' }] })
    ).body;
    const mk = async (r: Receiver, body: Record<string, unknown>) => {
      const res = await call('POST', '/webhook-endpoints', { url: r.url, ...body });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body;
    };
    const epAll = await mk(all, {});
    await mk(notes, { event_types: ['note.created'] });
    await mk(deals, { event_types: ['deal.*'] });
    await mk(pipelineCh, { channels: [`pipeline:${pipeline.id}`] });
    await mk(both, { event_types: ['deal.updated'], channels: [`pipeline:${pipeline.id}`] });

    const note = (await call('POST', '/notes', { title: 'Plan', body: 'ship it', metadata: { n: 1 } })).body;
    const deal = (await call('POST', '/deals', { title: 'Big', amount: 1234.5, stage_id: pipeline.stages[0].id })).body;
    assert.equal((await call('PATCH', `/deals/${deal.id}`, { title: 'Bigger' })).status, 200);
    const otherDeal = (
      await call('POST', '/deals', { title: 'Elsewhere', amount: 1, stage_id: otherPipeline.stages[0].id })
    ).body;
    assert.equal((await call('PATCH', `/deals/${otherDeal.id}`, { title: 'Elsewhere 2' })).status, 200);
    const member = (await call('PATCH', `/members/${acme.ownerId}`, { metadata: { k: 'v' } })).body;

    const noteDelivery = await arrival(all, about('note.created', note.id));
    assert.ok(signedBy(noteDelivery, epAll.signing_secret), 'signature verifies with node:crypto');
    assert.deepEqual(
      JSON.parse(noteDelivery.body).data,
      (await call('GET', `/notes/${note.id}`)).body,
      'note data is the GET body',
    );
    const dealDelivery = await arrival(all, about('deal.updated', deal.id));
    assert.deepEqual(
      JSON.parse(dealDelivery.body).data,
      (await call('GET', `/deals/${deal.id}`)).body,
      'deal data is the GET body',
    );
    const memberDelivery = await arrival(all, about('member.updated', member.id));
    assert.deepEqual(
      JSON.parse(memberDelivery.body).data,
      (await call('GET', `/members/${member.id}`)).body,
      'member data is the GET body',
    );

    await arrival(notes, about('note.created', note.id));
    await arrival(deals, about('deal.updated', otherDeal.id));
    await arrival(pipelineCh, about('deal.updated', deal.id));
    await arrival(both, about('deal.updated', deal.id));
    // The sentinel: each change is delivered to every endpoint it matched (one intake transaction
    // makes all of an event's deliveries; "delivered" means none is pending), so a receiver lacks
    // an event because the filters left it out, not because it is still on its way.
    await arrival(all, about('deal.created', deal.id));
    await arrival(all, about('deal.created', otherDeal.id));
    await arrival(all, about('deal.updated', otherDeal.id));
    for (const id of all.received.map((x) => x.headers['webhook-id'] as string))
      await eventually(
        `event ${id} is delivered to every endpoint it matched`,
        async () => (await call('GET', `/webhook-events/${id}`)).body.status === 'delivered',
      );
    assert.deepEqual(new Set(notes.received.map((x) => JSON.parse(x.body).type)), new Set(['note.created']));
    assert.deepEqual(
      new Set(ofType(deals, /./).map((x) => JSON.parse(x.body).type)),
      new Set(['deal.created', 'deal.updated']),
    );
    assert.ok(
      pipelineCh.received.every((x) => {
        const b = JSON.parse(x.body);
        return b.data.pipeline_id === pipeline.id || b.data.id === pipeline.id;
      }),
      'channel pipeline:<id> only',
    );
    assert.ok(ofType(pipelineCh, 'deal.created').length === 1, 'the deal of the pipeline');
    assert.deepEqual(
      both.received.map((x) => `${JSON.parse(x.body).type}:${JSON.parse(x.body).data.id}`),
      [`deal.updated:${deal.id}`],
      'both filters must match',
    );
    const ids = all.received.map((x) => x.headers['webhook-id']);
    assert.equal(new Set(ids).size, ids.length, 'each event once');
  });

  it('waits up to 10 s for a test delivery, past the gateway default deadline of 5 s', async () => {
    const slow = await receiver(() => ({ status: 204, delayMs: 6_000 }));
    const ep = (await call('POST', '/webhook-endpoints', { url: slow.url, event_types: ['note.created'] })).body;
    const res = await call('POST', `/webhook-endpoints/${ep.id}/test`, {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.ok(res.body.response_time_ms >= 5_900);
  });

  it('disables an endpoint that answers 410 Gone: audited as the system, and delivered as webhook_endpoint.disabled', async () => {
    const gone = await receiver(() => ({ status: 410 }));
    const watcher = await receiver();
    const ep = (await call('POST', '/webhook-endpoints', { url: gone.url, event_types: ['note.created'] })).body;
    await call('POST', '/webhook-endpoints', { url: watcher.url, event_types: ['webhook_endpoint.disabled'] });
    const note = (await call('POST', '/notes', { title: 'to a gone receiver' })).body;
    await arrival(gone, about('note.created', note.id));
    const notice = await arrival(watcher, about('webhook_endpoint.disabled', ep.id));
    assert.equal(JSON.parse(notice.body).data.is_enabled, false);
    assert.equal(JSON.parse(notice.body).data.signing_secret ?? null, null, 'never the secret');
    const got = (await call('GET', `/webhook-endpoints/${ep.id}`)).body;
    assert.equal(got.is_enabled, false);
    assert.match(got.disabled_reason, /410 Gone/);
    const entry = await eventually(
      'webhook_endpoint.disabled reached the audit log',
      async () =>
        (
          (await call('GET', '/audit-log?action=webhook_endpoint.disabled')).body.data as {
            resource_id: string;
            actor_id: string;
          }[]
        ).find((e) => e.resource_id === ep.id),
      15_000,
      100,
    );
    assert.equal(entry.actor_id, 'system');
  });

  it('delivers and lists an event whose data holds metadata as deep as the API accepts', async () => {
    let deep: Record<string, unknown> = { leaf: 'bottom' };
    for (let i = 1; i < 31; i++) deep = { [`level_${31 - i}`]: deep };
    const r = await receiver();
    await call('POST', '/webhook-endpoints', { url: r.url, event_types: ['note.created'] });
    const created = await call('POST', '/notes', { title: 'deep', metadata: deep });
    assert.equal(created.status, 201, JSON.stringify(created.body).slice(0, 300));
    const delivered = await arrival(r, about('note.created', created.body.id));
    assert.deepEqual(JSON.parse(delivered.body).data.metadata, deep);
    const got = await call('GET', `/webhook-events/${delivered.headers['webhook-id']}`);
    assert.equal(got.status, 200, JSON.stringify(got.body).slice(0, 300));
    assert.deepEqual(got.body.payload.data.metadata, deep);
    const listed = await call('GET', '/webhook-events?event_type=note.created&limit=200');
    assert.equal(listed.status, 200, JSON.stringify(listed.body).slice(0, 300));
  });

  it('refuses an endpoint past WEBHOOK_MAX_ENDPOINTS with 409 FAILED_PRECONDITION, until one is deleted', async () => {
    const capped = await stack.createTenant('Capped');
    // Filtered to a type this tenant never makes: its own webhook_endpoint.* events would otherwise
    // fan out to every one of them, and the attempts to an unreachable host would hold up the workers.
    const create = (i: number) =>
      call(
        'POST',
        '/webhook-endpoints',
        { url: `https://hooks.example.com/${i}`, event_types: ['note.created'] },
        capped.key,
      );
    const ids: string[] = [];
    for (let i = 0; i < MAX_ENDPOINTS; i++) ids.push((await create(i)).body.id);
    const refused = await create(MAX_ENDPOINTS);
    assertError(refused, 409, 'WEBHOOK_ENDPOINT_LIMIT_REACHED');
    assert.equal(refused.body.error.status, 'FAILED_PRECONDITION');
    assert.match(
      refused.body.error.message,
      new RegExp(
        `limit of ${MAX_ENDPOINTS} webhook endpoints.*DELETE /api/v1/webhook-endpoints/\\{id\\}.*WEBHOOK_MAX_ENDPOINTS`,
      ),
    );
    assert.equal(
      (await call('GET', '/webhook-endpoints?limit=100', undefined, capped.key)).body.data.length,
      MAX_ENDPOINTS,
      'nothing was created',
    );
    assert.equal((await call('DELETE', `/webhook-endpoints/${ids[0]}`, undefined, capped.key)).status, 204);
    assert.equal((await create(MAX_ENDPOINTS + 1)).status, 201);
    assert.equal(
      (await call('POST', '/webhook-endpoints', { url: 'https://hooks.example.com/x' })).status,
      201,
      'another tenant is unaffected',
    );
  });

  it('applies the roles: reads need read on webhooks, everything else admin', async () => {
    const invite = async (role: string) => {
      const inv = await call('POST', '/invitations', { email: `${role}-${randomUUID()}@hooks.test`, role });
      const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
      return claimed.body.api_key as string;
    };
    const member = await invite('member');
    const viewer = await invite('viewer');
    const ep = (await call('POST', '/webhook-endpoints', { url: 'https://hooks.example.com/x' })).body;
    for (const path of [
      '/webhook-endpoints',
      `/webhook-endpoints/${ep.id}`,
      '/webhook-event-types',
      '/webhook-events',
    ]) {
      assert.equal((await call('GET', path, undefined, member)).status, 200, `member GET ${path}`);
      assertError(await call('GET', path, undefined, viewer), 403);
    }
    for (const [method, path] of [
      ['POST', '/webhook-endpoints'],
      ['PATCH', `/webhook-endpoints/${ep.id}`],
      ['DELETE', `/webhook-endpoints/${ep.id}`],
      ['POST', `/webhook-endpoints/${ep.id}/rotate-secret`],
      ['POST', `/webhook-endpoints/${ep.id}/test`],
      ['POST', `/webhook-events/${randomUUID()}/retry`],
    ] as const) {
      assertError(
        await call(method, path, method === 'DELETE' ? undefined : { url: 'https://hooks.example.com/y' }, member),
        403,
      );
    }
  });

  it('shows a member with notes none no note event (404 by id), and endpoint URLs reduced below admin', async () => {
    const r = await receiver();
    const url = `${r.url}/tok_live_8f2?signature=abc`;
    const origin = new URL(url).origin;
    const ep = (
      await call('POST', '/webhook-endpoints', { url, event_types: ['note.created', 'webhook_endpoint.updated'] })
    ).body;
    const inv = await call('POST', '/invitations', { email: `no-notes-${randomUUID()}@hooks.test`, role: 'member' });
    const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    const member = claimed.body.api_key as string;
    const policies = await call('PUT', `/members/${claimed.body.member.id}/access-policies`, {
      policies: [{ domain: 'notes', access_level: 'none' }],
    });
    assert.equal(policies.status, 200, JSON.stringify(policies.body));
    assertError(await call('GET', '/notes', undefined, member), 403);

    const note = (await call('POST', '/notes', { title: 'Board minutes', body: 'the merger is off' })).body;
    await call('PATCH', `/webhook-endpoints/${ep.id}`, { description: 'after the note' });
    const noteEvent = (await arrival(r, about('note.created', note.id))).headers['webhook-id'] as string;
    const updated = (await arrival(r, about('webhook_endpoint.updated', ep.id))).headers['webhook-id'] as string;
    assert.equal((await call('GET', `/webhook-events/${noteEvent}`)).body.payload.data.body, 'the merger is off');

    const listed = await call('GET', '/webhook-events?limit=200', undefined, member);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.data.filter((e: { event_type: string }) => e.event_type.startsWith('note.')),
      [],
      'no note event in the list',
    );
    const seen = listed.body.data.find((e: { id: string }) => e.id === updated);
    assert.ok(seen, 'the endpoint event (webhooks read) is listed');
    assert.equal(seen.payload.data.url, `${origin}/…`, 'with its URL reduced');
    assert.deepEqual((await call('GET', '/webhook-events?event_type=note.created', undefined, member)).body.data, []);
    assertError(await call('GET', `/webhook-events/${noteEvent}`, undefined, member), 404, 'WEBHOOK_EVENT_NOT_FOUND');

    assert.equal((await call('GET', `/webhook-endpoints/${ep.id}`, undefined, member)).body.url, `${origin}/…`);
    assert.ok(
      (await call('GET', '/webhook-endpoints?limit=200', undefined, member)).body.data.every((e: { url: string }) =>
        e.url.endsWith('/…'),
      ),
    );
    assert.equal((await call('GET', `/webhook-endpoints/${ep.id}`)).body.url, url, 'the owner sees it whole');
  });

  it("never shows or delivers one tenant's endpoints and events to another", async () => {
    const r = await receiver();
    const ep = (await call('POST', '/webhook-endpoints', { url: r.url, event_types: ['note.created'] })).body;
    const note = (await call('POST', '/notes', { title: 'Secret plan' })).body;
    const delivered = await arrival(r, about('note.created', note.id));
    const eventId = delivered.headers['webhook-id'];
    for (const [method, path] of [
      ['GET', `/webhook-endpoints/${ep.id}`],
      ['PATCH', `/webhook-endpoints/${ep.id}`],
      ['DELETE', `/webhook-endpoints/${ep.id}`],
      ['POST', `/webhook-endpoints/${ep.id}/rotate-secret`],
      ['POST', `/webhook-endpoints/${ep.id}/test`],
      ['GET', `/webhook-events/${eventId}`],
      ['POST', `/webhook-events/${eventId}/retry`],
    ] as const) {
      assertError(await call(method, path, method === 'GET' || method === 'DELETE' ? undefined : {}, other.key), 404);
    }
    assert.ok(
      !(await call('GET', '/webhook-endpoints', undefined, other.key)).body.data.some(
        (e: { id: string }) => e.id === ep.id,
      ),
    );
    assert.ok(
      !(await call('GET', '/webhook-events?limit=200', undefined, other.key)).body.data.some(
        (e: { id: string }) => e.id === eventId,
      ),
    );
    // The sentinel: the other tenant's own endpoint got the change and every delivery of its event
    // is done (one intake transaction makes them all), so this endpoint would have it by now.
    const theirReceiver = await receiver();
    const theirEndpoint = await call(
      'POST',
      '/webhook-endpoints',
      { url: theirReceiver.url, event_types: ['note.created'] },
      other.key,
    );
    assert.equal(theirEndpoint.status, 201, JSON.stringify(theirEndpoint.body));
    const theirs = (await call('POST', '/notes', { title: 'Other' }, other.key)).body;
    const theirEvent = (await arrival(theirReceiver, about('note.created', theirs.id))).headers['webhook-id'] as string;
    await eventually(
      "the other tenant's event is delivered to every endpoint it matched",
      async () =>
        (await call('GET', `/webhook-events/${theirEvent}`, undefined, other.key)).body.status === 'delivered',
    );
    assert.ok(
      !r.received.some((x) => JSON.parse(x.body).data?.id === theirs.id),
      "the other tenant's change never reaches this endpoint",
    );
  });
});
