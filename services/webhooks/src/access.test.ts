/**
 * What a member sees of webhooks by its access levels (signed into the caller identity by the
 * gateway): events only of the domains it may read — in the list (full pages), by id, in retries —
 * and endpoint and MCP server URLs reduced to their origin below admin.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { AccessLevels } from '@workauto/grpc';
import { eventually, withAccess } from '@workauto/testing';
import { WebhookDeliveryStatus, type WebhookEvent } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { failure, S, startWebhooks, tenant } from './test-support.js';
import { startReceiver, type Receiver } from './testing/receiver.js';

type Webhooks = Awaited<ReturnType<typeof startWebhooks>>;
type Tenant = ReturnType<typeof tenant>;

/** The member role's default levels (docs/api.md §3), with notes taken away. */
const NO_NOTES: AccessLevels = {
  calendar: 'write',
  crm: 'write',
  notes: 'none',
  tasks: 'write',
  agents: 'read',
  apps: 'read',
  members: 'read',
  webhooks: 'read',
};

describe('webhook events and endpoints by the caller’s access levels', () => {
  let w: Webhooks;
  let receiver: Receiver;
  before(async () => {
    receiver = await startReceiver();
    w = await startWebhooks({ settings: { retrySchedule: [0] } });
  });
  after(async () => {
    await w.stop();
    await receiver.close();
  });

  /**
   * An endpoint receiving every event of the tenant (at a URL whose path and query hold a token),
   * once its own webhook_endpoint.created is recorded.
   */
  const listen = async (t: Tenant, url = `${receiver.url}/hooks/tok_123?key=secret`) => {
    const ep = await w.client.call(S.createWebhookEndpoint, { url, event_types: [], channels: [] }, t.call);
    await eventually('the endpoint’s own created event is recorded', async () =>
      (await w.client.call(S.listWebhookEvents, {}, t.call)).data.some(
        (e) => e.event_type === 'webhook_endpoint.created',
      ),
    );
    return ep;
  };
  const list = async (t: Tenant, access: AccessLevels | undefined, limit = 200) => {
    const call = access ? withAccess(t.call, access) : t.call;
    const seen: WebhookEvent[] = [];
    const pages: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await w.client.call(S.listWebhookEvents, { limit, cursor }, call);
      seen.push(...page.data);
      pages.push(page.data.length);
      cursor = page.has_more ? page.next_cursor : undefined;
    } while (cursor);
    return { seen, pages };
  };

  it('lists only the events of domains the caller may read, in full pages, and answers 404 for the others', async () => {
    const t = tenant();
    await listen(t);
    const visible: string[] = [];
    const hidden: string[] = [];
    // Hidden note events around the visible ones: a filter after LIMIT would give short pages.
    for (let i = 0; i < 6; i++) {
      for (const type of ['note.created', 'note.updated', 'tag.created', 'note.tagged'])
        hidden.push(await w.publish({ tenantId: t.id, type }));
      visible.push(await w.publish({ tenantId: t.id, type: i % 2 ? 'deal.created' : 'task.created' }));
    }
    for (const type of [
      'contact.created',
      'calendar_event.created',
      'app.created',
      'member.created',
      'agent_run.created',
    ])
      visible.push(await w.publish({ tenantId: t.id, type }));

    const everything = await list(t, undefined);
    assert.equal(everything.seen.length, 1 + visible.length + hidden.length, 'a caller without levels sees all');
    const restricted = await list(t, NO_NOTES, 4);
    const ids = restricted.seen.map((e) => e.id);
    assert.equal(
      restricted.seen.filter((e) => /^(note|tag)\./.test(e.event_type)).length,
      0,
      'no note event in the list',
    );
    assert.deepEqual(ids.filter((id) => visible.includes(id)).sort(), [...visible].sort());
    // 11 visible + webhook_endpoint.created = 12: three full pages, none short.
    assert.deepEqual(restricted.pages, [4, 4, 4]);

    const noteEvent = hidden[0]!;
    const notFound = await failure(w.client.call(S.getWebhookEvent, { id: noteEvent }, withAccess(t.call, NO_NOTES)));
    assert.deepEqual([notFound.code, notFound.reason], [grpc.status.NOT_FOUND, 'WEBHOOK_EVENT_NOT_FOUND']);
    assert.equal((await w.client.call(S.getWebhookEvent, { id: noteEvent }, t.call)).id, noteEvent);
    const deal = await w.client.call(S.getWebhookEvent, { id: visible[1]! }, withAccess(t.call, NO_NOTES));
    assert.equal(deal.event_type, 'deal.created');

    // Integrations none, as for the member role: its events are hidden too.
    const key = await w.publish({ tenantId: t.id, type: 'integration_key.updated' });
    assert.equal(
      (await list(t, NO_NOTES)).seen.some((e) => e.id === key),
      false,
      'integration_key.* needs read on integrations',
    );
  });

  it('hides a webhook_event.retried whose retried event is of a domain the caller may not read, at any depth', async () => {
    const t = tenant();
    await listen(t);
    const note = { type: 'note.created', timestamp: '2026-01-01T00:00:00Z', data: { id: 'n1', title: 'Secret' } };
    const retried = (event_type: string, payload: unknown) => ({ id: crypto.randomUUID(), event_type, payload });
    const once = await w.publish({
      tenantId: t.id,
      type: 'webhook_event.retried',
      data: retried('note.created', note),
    });
    const twice = await w.publish({
      tenantId: t.id,
      type: 'webhook_event.retried',
      data: retried('webhook_event.retried', {
        type: 'webhook_event.retried',
        timestamp: '2026-01-01T00:00:01Z',
        data: retried('note.created', note),
      }),
    });
    const dealRetried = await w.publish({
      tenantId: t.id,
      type: 'webhook_event.retried',
      data: retried('deal.created', { type: 'deal.created', timestamp: '2026-01-01T00:00:00Z', data: { id: 'd1' } }),
    });
    const seen = (await list(t, NO_NOTES)).seen.map((e) => e.id);
    assert.deepEqual(
      [seen.includes(once), seen.includes(twice), seen.includes(dealRetried)],
      [false, false, true],
      'the retried note event is hidden, nested once or twice; a retried deal event is shown',
    );
    for (const id of [once, twice])
      assert.equal(
        (await failure(w.client.call(S.getWebhookEvent, { id }, withAccess(t.call, NO_NOTES)))).code,
        grpc.status.NOT_FOUND,
      );
    assert.equal((await list(t, undefined)).seen.length, 4);
  });

  it('refuses a retry of an event of a domain the caller may not read (404), even with admin on webhooks', async () => {
    const t = tenant();
    const failing = await startReceiver(() => ({ status: 500 }));
    after(() => failing.close());
    await listen(t, failing.url);
    const id = await w.publish({ tenantId: t.id, type: 'note.created' });
    await eventually('the delivery failed for good', async () => {
      const d = await w.client.call(S.getWebhookEvent, { id }, t.call);
      return d.deliveries[0]?.status === WebhookDeliveryStatus.WEBHOOK_DELIVERY_STATUS_FAILED;
    });
    const admin = withAccess(t.call, { ...NO_NOTES, webhooks: 'admin' });
    const refused = await failure(w.client.call(S.retryWebhookEvent, { id }, admin));
    assert.deepEqual([refused.code, refused.reason], [grpc.status.NOT_FOUND, 'WEBHOOK_EVENT_NOT_FOUND']);
    const detail = await w.client.call(S.getWebhookEvent, { id }, t.call);
    assert.equal(detail.deliveries[0]!.status, WebhookDeliveryStatus.WEBHOOK_DELIVERY_STATUS_FAILED, 'not requeued');
    const withNotes = withAccess(t.call, { ...NO_NOTES, notes: 'read', webhooks: 'admin' });
    assert.deepEqual(await w.client.call(S.retryWebhookEvent, { id }, withNotes), { requeued: 1 });
  });

  it('shows endpoint and MCP server URLs reduced to scheme, host and port below admin, in endpoints and event payloads', async () => {
    const t = tenant();
    const full = `${receiver.url}/hooks/tok_123?key=secret`;
    const origin = new URL(receiver.url).origin;
    const ep = await listen(t, full);
    const mcp = 'https://mcp.example.com:8443/v1/sk_live_abc?token=x';
    await w.publish({ tenantId: t.id, type: 'app.created', data: { id: 'a1', slug: 'x', mcp_server_url: mcp } });
    const reader = withAccess(t.call, NO_NOTES);
    const admin = withAccess(t.call, { ...NO_NOTES, webhooks: 'admin', apps: 'admin' });

    assert.equal((await w.client.call(S.getWebhookEndpoint, { id: ep.id }, reader)).url, `${origin}/…`);
    assert.deepEqual(
      (await w.client.call(S.listWebhookEndpoints, {}, reader)).data.map((e) => e.url),
      [`${origin}/…`],
    );
    assert.equal((await w.client.call(S.getWebhookEndpoint, { id: ep.id }, admin)).url, full);
    assert.equal((await w.client.call(S.getWebhookEndpoint, { id: ep.id }, t.call)).url, full, 'no levels: full');

    const payloads = async (call: ReturnType<typeof withAccess>) => {
      const page = await w.client.call(S.listWebhookEvents, {}, call);
      const of = (type: string) =>
        (page.data.find((e) => e.event_type === type)!.payload as { data: { url?: string; mcp_server_url?: string } })
          .data;
      return [of('webhook_endpoint.created').url, of('app.created').mcp_server_url];
    };
    assert.deepEqual(await payloads(reader), [`${origin}/…`, 'https://mcp.example.com:8443/…']);
    assert.deepEqual(await payloads(admin), [full, mcp]);
  });
});
