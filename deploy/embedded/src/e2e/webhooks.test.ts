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
import type { WorkautoClient } from '@workauto/client';
import {
  assertError,
  assertRecord,
  fails,
  ok,
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
  /** Acme's owner. */
  let api: WorkautoClient;
  const receivers: Receiver[] = [];
  const receiver = async (answer?: Receiver['answer']) => {
    const r = await startReceiver(answer);
    receivers.push(r);
    return r;
  };
  const byId = (id: string) => ({ params: { path: { id } } });
  /** The `data` of a webhook event's payload (the resource as GET returns it). */
  const dataOf = (event: { payload: Record<string, unknown> | null }) =>
    event.payload?.data as Record<string, unknown> | undefined;
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
  /** A member of Acme with this role, as its own client. */
  const invite = async (role: 'member' | 'viewer') => {
    const inv = await ok(
      api.POST('/api/v1/invitations', { body: { email: `${role}-${randomUUID()}@hooks.test`, role } }),
      201,
    );
    const claimed = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
    return { id: claimed.member!.id, client: stack.client(claimed.api_key) };
  };

  before(async () => {
    stack = await startTestStack({
      webhooks: { settings: { retrySchedule: [0, 500, 1_000], timeoutMs: 8_000, maxEndpoints: MAX_ENDPOINTS } },
    });
    acme = await stack.createTenant('Acme');
    other = await stack.createTenant('Other');
    api = stack.client(acme.key);
  });
  after(async () => {
    for (const r of receivers) await r.close();
    await stack?.stop();
  });

  it('serves every endpoint: create (secret once), list, get, patch, rotate, test, event types, events, retry, delete', async () => {
    const r = await receiver();
    const ep = await ok(
      api.POST('/api/v1/webhook-endpoints', {
        body: {
          url: r.url,
          description: 'CRM sync',
          event_types: ['note.created', 'deal.*'],
          channels: ['deal'],
          metadata: { team: 'x' },
        },
      }),
      201,
    );
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
    assert.match(ep.signing_secret!, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(ep.tenant_id, acme.id);
    assert.equal(ep.is_enabled, true);
    const endpoint = byId(ep.id);

    const got = await ok(api.GET('/api/v1/webhook-endpoints/{id}', endpoint));
    assert.equal(got.signing_secret ?? null, null, 'the secret is shown only on create and rotate');
    assert.deepEqual({ ...got, signing_secret: undefined }, { ...ep, signing_secret: undefined });
    const list = await ok(api.GET('/api/v1/webhook-endpoints', { params: { query: { limit: 1 } } }));
    assert.equal(list.data.length, 1);
    assert.equal(typeof list.has_more, 'boolean');
    assert.ok(list.data.every((e) => !e.signing_secret));

    const patched = await ok(
      api.PATCH('/api/v1/webhook-endpoints/{id}', {
        ...endpoint,
        // `channels: null` clears the list (docs/api.md: null clears a field), which the document's
        // type of a list field does not admit yet.
        body: { description: null, event_types: ['note.*'], channels: null as unknown as string[], is_enabled: false },
      }),
    );
    assert.equal(patched.description ?? null, null);
    assert.deepEqual(patched.event_types, ['note.*']);
    assert.deepEqual(patched.channels, []);
    assert.equal(patched.is_enabled, false);
    assert.equal(patched.disabled_reason, 'disabled by a user');
    assert.ok(patched.disabled_at);
    const enabled = await ok(api.PATCH('/api/v1/webhook-endpoints/{id}', { ...endpoint, body: { is_enabled: true } }));
    assert.equal(enabled.disabled_at ?? null, null);
    assert.equal(enabled.disabled_reason ?? null, null);
    assert.deepEqual(enabled.event_types, ['note.*'], 'fields left out keep their values');

    const rotating = Date.now();
    const rotated = await ok(api.POST('/api/v1/webhook-endpoints/{id}/rotate-secret', { ...endpoint, body: {} }));
    const rotatedBy = Date.now();
    assert.notEqual(rotated.signing_secret, ep.signing_secret);
    // When the previous secret stops signing: the grace (24 h) after the rotation, which happened
    // while the call was in flight (the server's clock is this machine's).
    const graceEnds = Date.parse(rotated.previous_secret_expires_at!) - 24 * 3_600_000;
    assert.ok(
      rotating <= graceEnds && graceEnds <= rotatedBy,
      `previous_secret_expires_at ${rotated.previous_secret_expires_at} is 24 h after the rotation`,
    );
    assert.equal(got.previous_secret_expires_at ?? null, null, 'only the rotation says it');

    const tested = await ok(api.POST('/api/v1/webhook-endpoints/{id}/test', { ...endpoint, body: {} }));
    assert.equal(tested.success, true);
    assert.equal(tested.http_status, 200);
    const testDelivery = await arrival(r, (x) => JSON.parse(x.body).type === 'webhook.test');
    assert.ok(
      signedBy(testDelivery, rotated.signing_secret!) && signedBy(testDelivery, ep.signing_secret!),
      'both secrets during the grace',
    );
    const product = JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    assert.equal(testDelivery.headers['user-agent'], `workauto-webhooks/${product.version}`);

    const types = await ok(api.GET('/api/v1/webhook-event-types'));
    assert.ok(Array.isArray(types), 'a bare array');
    for (const name of ['note.created', 'deal.stage_changed', 'member.updated', 'webhook_endpoint.disabled'])
      assert.ok(
        types.some((t) => t.name === name),
        name,
      );

    const note = await ok(api.POST('/api/v1/notes', { body: { title: 'Hello', body: 'world' } }), 201);
    const delivered = await arrival(r, about('note.created', note.id));
    const events = await ok(
      api.GET('/api/v1/webhook-events', { params: { query: { event_type: 'note.created', endpoint_id: ep.id } } }),
    );
    const event = events.data.find((e) => e.id === delivered.headers['webhook-id'])!;
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
      const res = await ok(api.GET('/api/v1/webhook-events/{id}', byId(event.id)));
      return res.status === 'delivered' && res;
    });
    assert.equal(detail.deliveries[0]!.endpoint_id, ep.id);
    assert.equal(typeof detail.deliveries[0]!.attempt_count, 'number');
    assert.equal(detail.deliveries[0]!.attempts[0]!.trigger, 'scheduled');
    const retried = await ok(api.POST('/api/v1/webhook-events/{id}/retry', { ...byId(event.id), body: {} }));
    assert.deepEqual(retried, { requeued: 0 });
    await fails(api.GET('/api/v1/webhook-events', { params: { query: { status: 'bogus' } } }), 400);

    await ok(api.DELETE('/api/v1/webhook-endpoints/{id}', endpoint), 204);
    await fails(api.GET('/api/v1/webhook-endpoints/{id}', endpoint), 404);
  });

  it('refuses bad input with 400s that name the field', async () => {
    // Raw: a body without the required url, which the typed client does not let through.
    const noUrl = await stack.api('POST', '/api/v1/webhook-endpoints', { key: acme.key, body: {} });
    assertError(noUrl, 400);
    assert.deepEqual(violations(noUrl), ['url']);
    const create = (body: { url: string; event_types?: string[]; channels?: string[] }) =>
      fails(api.POST('/api/v1/webhook-endpoints', { body }), 400);
    const badType = await create({
      url: 'https://hooks.example.com/x',
      event_types: ['note.created', 'note.exploded'],
    });
    assert.deepEqual(violations(badType), ['event_types[1]']);
    const badChannel = await create({ url: 'https://hooks.example.com/x', channels: ['Pipeline x'] });
    assert.deepEqual(violations(badChannel), ['channels[0]']);
    const userinfo = await create({ url: 'https://u:p@hooks.example.com/x' });
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
    const pipeline = await ok(
      api.POST('/api/v1/pipelines', {
        body: {
          name: 'Sales',
          stages: [
            { name: 'Lead', stage_type: 'open' },
            { name: 'Won', stage_type: 'won' },
          ],
        },
      }),
      201,
    );
    const otherPipeline = await ok(
      api.POST('/api/v1/pipelines', { body: { name: 'Other', stages: [{ name: 'Lead', stage_type: 'open' }] } }),
      201,
    );
    const mk = async (r: Receiver, body: { event_types?: string[]; channels?: string[] }) =>
      ok(api.POST('/api/v1/webhook-endpoints', { body: { url: r.url, ...body } }), 201);
    const epAll = await mk(all, {});
    await mk(notes, { event_types: ['note.created'] });
    await mk(deals, { event_types: ['deal.*'] });
    await mk(pipelineCh, { channels: [`pipeline:${pipeline.id}`] });
    await mk(both, { event_types: ['deal.updated'], channels: [`pipeline:${pipeline.id}`] });

    const note = await ok(
      api.POST('/api/v1/notes', { body: { title: 'Plan', body: 'ship it', metadata: { n: 1 } } }),
      201,
    );
    const deal = await ok(
      api.POST('/api/v1/deals', { body: { title: 'Big', amount: 1234.5, stage_id: pipeline.stages[0]!.id } }),
      201,
    );
    await ok(api.PATCH('/api/v1/deals/{id}', { ...byId(deal.id), body: { title: 'Bigger' } }));
    const otherDeal = await ok(
      api.POST('/api/v1/deals', { body: { title: 'Elsewhere', amount: 1, stage_id: otherPipeline.stages[0]!.id } }),
      201,
    );
    await ok(api.PATCH('/api/v1/deals/{id}', { ...byId(otherDeal.id), body: { title: 'Elsewhere 2' } }));
    const member = await ok(
      api.PATCH('/api/v1/members/{id}', { ...byId(acme.ownerId), body: { metadata: { k: 'v' } } }),
    );

    const noteDelivery = await arrival(all, about('note.created', note.id));
    assert.ok(signedBy(noteDelivery, epAll.signing_secret!), 'signature verifies with node:crypto');
    assert.deepEqual(
      JSON.parse(noteDelivery.body).data,
      await ok(api.GET('/api/v1/notes/{id}', byId(note.id))),
      'note data is the GET body',
    );
    const dealDelivery = await arrival(all, about('deal.updated', deal.id));
    assert.deepEqual(
      JSON.parse(dealDelivery.body).data,
      await ok(api.GET('/api/v1/deals/{id}', byId(deal.id))),
      'deal data is the GET body',
    );
    const memberDelivery = await arrival(all, about('member.updated', member.id));
    assert.deepEqual(
      JSON.parse(memberDelivery.body).data,
      await ok(api.GET('/api/v1/members/{id}', byId(member.id))),
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
        async () => (await ok(api.GET('/api/v1/webhook-events/{id}', byId(id)))).status === 'delivered',
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
    const ep = await ok(
      api.POST('/api/v1/webhook-endpoints', { body: { url: slow.url, event_types: ['note.created'] } }),
      201,
    );
    const res = await ok(api.POST('/api/v1/webhook-endpoints/{id}/test', { ...byId(ep.id), body: {} }));
    assert.equal(res.success, true);
    assert.ok(res.response_time_ms! >= 5_900);
  });

  it('disables an endpoint that answers 410 Gone: audited as the system, and delivered as webhook_endpoint.disabled', async () => {
    const gone = await receiver(() => ({ status: 410 }));
    const watcher = await receiver();
    const ep = await ok(
      api.POST('/api/v1/webhook-endpoints', { body: { url: gone.url, event_types: ['note.created'] } }),
      201,
    );
    await ok(
      api.POST('/api/v1/webhook-endpoints', { body: { url: watcher.url, event_types: ['webhook_endpoint.disabled'] } }),
      201,
    );
    const note = await ok(api.POST('/api/v1/notes', { body: { title: 'to a gone receiver' } }), 201);
    await arrival(gone, about('note.created', note.id));
    const notice = await arrival(watcher, about('webhook_endpoint.disabled', ep.id));
    assert.equal(JSON.parse(notice.body).data.is_enabled, false);
    assert.equal(JSON.parse(notice.body).data.signing_secret ?? null, null, 'never the secret');
    const got = await ok(api.GET('/api/v1/webhook-endpoints/{id}', byId(ep.id)));
    assert.equal(got.is_enabled, false);
    assert.match(got.disabled_reason ?? '', /410 Gone/);
    const entry = await eventually(
      'webhook_endpoint.disabled reached the audit log',
      async () =>
        (
          await ok(api.GET('/api/v1/audit-log', { params: { query: { action: 'webhook_endpoint.disabled' } } }))
        ).data.find((e) => e.resource_id === ep.id),
      15_000,
      100,
    );
    assert.equal(entry.actor_id, 'system');
  });

  it('delivers and lists an event whose data holds metadata as deep as the API accepts', async () => {
    let deep: Record<string, unknown> = { leaf: 'bottom' };
    for (let i = 1; i < 31; i++) deep = { [`level_${31 - i}`]: deep };
    const r = await receiver();
    await ok(api.POST('/api/v1/webhook-endpoints', { body: { url: r.url, event_types: ['note.created'] } }), 201);
    const created = await ok(api.POST('/api/v1/notes', { body: { title: 'deep', metadata: deep } }), 201);
    const delivered = await arrival(r, about('note.created', created.id));
    assert.deepEqual(JSON.parse(delivered.body).data.metadata, deep);
    const got = await ok(api.GET('/api/v1/webhook-events/{id}', byId(delivered.headers['webhook-id'] as string)));
    assert.deepEqual(dataOf(got)?.metadata, deep);
    await ok(api.GET('/api/v1/webhook-events', { params: { query: { event_type: 'note.created', limit: 200 } } }));
  });

  it('refuses an endpoint past WEBHOOK_MAX_ENDPOINTS with 409 FAILED_PRECONDITION, until one is deleted', async () => {
    const capped = stack.client((await stack.createTenant('Capped')).key);
    // Filtered to a type this tenant never makes: its own webhook_endpoint.* events would otherwise
    // fan out to every one of them, and the attempts to an unreachable host would hold up the workers.
    const create = (i: number) =>
      capped.POST('/api/v1/webhook-endpoints', {
        body: { url: `https://hooks.example.com/${i}`, event_types: ['note.created'] },
      });
    const ids: string[] = [];
    for (let i = 0; i < MAX_ENDPOINTS; i++) ids.push((await ok(create(i), 201)).id);
    const refused = await fails(create(MAX_ENDPOINTS), 409, 'WEBHOOK_ENDPOINT_LIMIT_REACHED');
    assert.equal(refused.body.error.status, 'FAILED_PRECONDITION');
    assert.match(
      refused.body.error.message,
      new RegExp(
        `limit of ${MAX_ENDPOINTS} webhook endpoints.*DELETE /api/v1/webhook-endpoints/\\{id\\}.*WEBHOOK_MAX_ENDPOINTS`,
      ),
    );
    assert.equal(
      (await ok(capped.GET('/api/v1/webhook-endpoints', { params: { query: { limit: 100 } } }))).data.length,
      MAX_ENDPOINTS,
      'nothing was created',
    );
    await ok(capped.DELETE('/api/v1/webhook-endpoints/{id}', byId(ids[0]!)), 204);
    await ok(create(MAX_ENDPOINTS + 1), 201);
    // Another tenant is unaffected.
    await ok(api.POST('/api/v1/webhook-endpoints', { body: { url: 'https://hooks.example.com/x' } }), 201);
  });

  it('applies the roles: reads need read on webhooks, everything else admin', async () => {
    const member = (await invite('member')).client;
    const viewer = (await invite('viewer')).client;
    const ep = await ok(api.POST('/api/v1/webhook-endpoints', { body: { url: 'https://hooks.example.com/x' } }), 201);
    const endpoint = byId(ep.id);
    const reads: [string, (as: WorkautoClient) => Promise<{ data?: unknown; error?: unknown; response: Response }>][] =
      [
        ['GET /webhook-endpoints', (as) => as.GET('/api/v1/webhook-endpoints')],
        ['GET /webhook-endpoints/{id}', (as) => as.GET('/api/v1/webhook-endpoints/{id}', endpoint)],
        ['GET /webhook-event-types', (as) => as.GET('/api/v1/webhook-event-types')],
        ['GET /webhook-events', (as) => as.GET('/api/v1/webhook-events')],
      ];
    for (const [what, read] of reads) {
      assert.equal((await read(member)).response.status, 200, `member ${what}`);
      await fails(read(viewer), 403);
    }
    const url = { url: 'https://hooks.example.com/y' };
    for (const write of [
      () => member.POST('/api/v1/webhook-endpoints', { body: url }),
      () => member.PATCH('/api/v1/webhook-endpoints/{id}', { ...endpoint, body: url }),
      () => member.DELETE('/api/v1/webhook-endpoints/{id}', endpoint),
      () => member.POST('/api/v1/webhook-endpoints/{id}/rotate-secret', { ...endpoint, body: {} }),
      () => member.POST('/api/v1/webhook-endpoints/{id}/test', { ...endpoint, body: {} }),
      () => member.POST('/api/v1/webhook-events/{id}/retry', { ...byId(randomUUID()), body: {} }),
    ])
      await fails(write(), 403);
  });

  it('shows a member with notes none no note event (404 by id), and endpoint URLs reduced below admin', async () => {
    const r = await receiver();
    const url = `${r.url}/tok_live_8f2?signature=abc`;
    const origin = new URL(url).origin;
    const ep = await ok(
      api.POST('/api/v1/webhook-endpoints', {
        body: { url, event_types: ['note.created', 'webhook_endpoint.updated'] },
      }),
      201,
    );
    const { id: memberId, client: member } = await invite('member');
    await ok(
      api.PUT('/api/v1/members/{member_id}/access-policies', {
        params: { path: { member_id: memberId } },
        body: { policies: [{ domain: 'notes', access_level: 'none' }] },
      }),
    );
    await fails(member.GET('/api/v1/notes'), 403);

    const note = await ok(
      api.POST('/api/v1/notes', { body: { title: 'Board minutes', body: 'the merger is off' } }),
      201,
    );
    await ok(api.PATCH('/api/v1/webhook-endpoints/{id}', { ...byId(ep.id), body: { description: 'after the note' } }));
    const noteEvent = (await arrival(r, about('note.created', note.id))).headers['webhook-id'] as string;
    const updated = (await arrival(r, about('webhook_endpoint.updated', ep.id))).headers['webhook-id'] as string;
    assert.equal(dataOf(await ok(api.GET('/api/v1/webhook-events/{id}', byId(noteEvent))))?.body, 'the merger is off');

    const listed = await ok(member.GET('/api/v1/webhook-events', { params: { query: { limit: 200 } } }));
    assert.deepEqual(
      listed.data.filter((e) => e.event_type.startsWith('note.')),
      [],
      'no note event in the list',
    );
    const seen = listed.data.find((e) => e.id === updated);
    assert.ok(seen, 'the endpoint event (webhooks read) is listed');
    assert.equal(dataOf(seen)?.url, `${origin}/…`, 'with its URL reduced');
    assert.deepEqual(
      (await ok(member.GET('/api/v1/webhook-events', { params: { query: { event_type: 'note.created' } } }))).data,
      [],
    );
    await fails(member.GET('/api/v1/webhook-events/{id}', byId(noteEvent)), 404, 'WEBHOOK_EVENT_NOT_FOUND');

    assert.equal((await ok(member.GET('/api/v1/webhook-endpoints/{id}', byId(ep.id)))).url, `${origin}/…`);
    assert.ok(
      (await ok(member.GET('/api/v1/webhook-endpoints', { params: { query: { limit: 200 } } }))).data.every((e) =>
        e.url.endsWith('/…'),
      ),
    );
    assert.equal(
      (await ok(api.GET('/api/v1/webhook-endpoints/{id}', byId(ep.id)))).url,
      url,
      'the owner sees it whole',
    );
  });

  it("never shows or delivers one tenant's endpoints and events to another", async () => {
    const theirApi = stack.client(other.key);
    const r = await receiver();
    const ep = await ok(
      api.POST('/api/v1/webhook-endpoints', { body: { url: r.url, event_types: ['note.created'] } }),
      201,
    );
    const note = await ok(api.POST('/api/v1/notes', { body: { title: 'Secret plan' } }), 201);
    const delivered = await arrival(r, about('note.created', note.id));
    const eventId = delivered.headers['webhook-id'] as string;
    const endpoint = byId(ep.id);
    for (const call of [
      () => theirApi.GET('/api/v1/webhook-endpoints/{id}', endpoint),
      () => theirApi.PATCH('/api/v1/webhook-endpoints/{id}', { ...endpoint, body: {} }),
      () => theirApi.DELETE('/api/v1/webhook-endpoints/{id}', endpoint),
      () => theirApi.POST('/api/v1/webhook-endpoints/{id}/rotate-secret', { ...endpoint, body: {} }),
      () => theirApi.POST('/api/v1/webhook-endpoints/{id}/test', { ...endpoint, body: {} }),
      () => theirApi.GET('/api/v1/webhook-events/{id}', byId(eventId)),
      () => theirApi.POST('/api/v1/webhook-events/{id}/retry', { ...byId(eventId), body: {} }),
    ])
      await fails(call(), 404);
    assert.ok(!(await ok(theirApi.GET('/api/v1/webhook-endpoints'))).data.some((e) => e.id === ep.id));
    assert.ok(
      !(await ok(theirApi.GET('/api/v1/webhook-events', { params: { query: { limit: 200 } } }))).data.some(
        (e) => e.id === eventId,
      ),
    );
    // The sentinel: the other tenant's own endpoint got the change and every delivery of its event
    // is done (one intake transaction makes them all), so this endpoint would have it by now.
    const theirReceiver = await receiver();
    await ok(
      theirApi.POST('/api/v1/webhook-endpoints', { body: { url: theirReceiver.url, event_types: ['note.created'] } }),
      201,
    );
    const theirs = await ok(theirApi.POST('/api/v1/notes', { body: { title: 'Other' } }), 201);
    const theirEvent = (await arrival(theirReceiver, about('note.created', theirs.id))).headers['webhook-id'] as string;
    await eventually(
      "the other tenant's event is delivered to every endpoint it matched",
      async () => (await ok(theirApi.GET('/api/v1/webhook-events/{id}', byId(theirEvent)))).status === 'delivered',
    );
    assert.ok(
      !r.received.some((x) => JSON.parse(x.body).data?.id === theirs.id),
      "the other tenant's change never reaches this endpoint",
    );
  });
});
