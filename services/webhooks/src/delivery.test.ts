/**
 * Deliveries against real PostgreSQL and real HTTP receivers on loopback: signatures, retries,
 * Retry-After, 410, redirects, auto-disable, rotation, per-endpoint isolation, the test delivery.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { decodeEvent } from '@workauto/events';
import { setLogTarget } from '@workauto/logger';
import { captureLogs, eventually } from '@workauto/testing';
import {
  WebhookAttemptTrigger,
  WebhookDeliveryStatus,
  WebhookEventStatus,
} from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { failure, S, startWebhooks, tenant } from './test-support.js';
import { signaturesOf, signedBy, startReceiver, type Receiver } from './testing/receiver.js';

type Webhooks = Awaited<ReturnType<typeof startWebhooks>>;
type Tenant = ReturnType<typeof tenant>;

const { FAILED, SUCCEEDED } = {
  FAILED: WebhookDeliveryStatus.WEBHOOK_DELIVERY_STATUS_FAILED,
  SUCCEEDED: WebhookDeliveryStatus.WEBHOOK_DELIVERY_STATUS_SUCCEEDED,
};

/** The service's own events (webhook_endpoint.*) are domain events too: left out unless a test asks for them. */
const TEST_TYPES = ['note.*', 'task.*', 'deal.*'];

const createdSecrets: string[] = [];

async function endpoint(
  w: Webhooks,
  t: Tenant,
  url: string,
  extra: { event_types?: string[]; channels?: string[] } = {},
) {
  const ep = await w.client.call(
    S.createWebhookEndpoint,
    { url, event_types: extra.event_types ?? TEST_TYPES, channels: extra.channels ?? [] },
    t.call,
  );
  createdSecrets.push(ep.signing_secret!);
  return ep;
}

async function settled(w: Webhooks, t: Tenant, eventId: string, ms = 15_000) {
  let detail = await w.client.call(S.getWebhookEvent, { id: eventId }, t.call);
  await eventually(
    `event ${eventId} settles`,
    async () => {
      detail = await w.client.call(S.getWebhookEvent, { id: eventId }, t.call);
      return detail.status !== WebhookEventStatus.WEBHOOK_EVENT_STATUS_PENDING;
    },
    ms,
  );
  return detail;
}

/** Whether the event's delivery succeeded (its attempt recorded). */
async function delivered(w: Webhooks, t: Tenant, eventId: string): Promise<boolean> {
  const detail = await w.client.call(S.getWebhookEvent, { id: eventId }, t.call);
  return detail.deliveries.some((d) => d.status === SUCCEEDED);
}

/** How many delivery jobs of an endpoint are in each state. */
async function jobStates(w: Webhooks, endpointId: string): Promise<Record<string, number>> {
  const { rows } = await w.db.query<{ state: string; n: number }>(
    'SELECT state, count(*)::int AS n FROM jobs WHERE concurrency_key = $1 GROUP BY state ORDER BY state',
    [endpointId],
  );
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/** The webhooks service's own events (its outbox), newest last. */
async function ownEvents(w: Webhooks, type: string) {
  const { rows } = await w.db.query<{ payload: Buffer }>(
    'SELECT payload FROM outbox WHERE event_type = $1 ORDER BY seq',
    [type],
  );
  return rows.map((r) => decodeEvent(r.payload));
}

describe('webhook deliveries', () => {
  let w: Webhooks;
  const receivers: Receiver[] = [];
  const receiver = async (answer?: Receiver['answer']) => {
    const r = await startReceiver(answer);
    receivers.push(r);
    return r;
  };
  // Every line the service logs at debug level is captured (and kept out of the test output), to
  // check that no signing secret is ever in one.
  const logs = captureLogs();
  before(async () => {
    if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_chunk, _enc, done) => done() }));
    w = await startWebhooks({ settings: { retrySchedule: [0, 500, 1000], timeoutMs: 1_500 }, logLevel: 'debug' });
  });
  after(async () => {
    logs.stop();
    for (const r of receivers) await r.close();
    await w.stop();
    for (const secret of createdSecrets)
      assert.ok(!logs.text().includes(secret.slice(6)), 'no signing secret in any log line');
  });

  it('delivers a matching event once, signed (checked with node:crypto), with the event id as webhook-id', async () => {
    const t = tenant();
    const r = await receiver();
    const ep = await endpoint(w, t, r.url);
    assert.match(ep.signing_secret!, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(ep.signing_secret!.slice(6), 'base64').length, 32);
    const data = { id: 'n1', title: 'Plan', nested: { a: [1, 2] } };
    const sentFrom = Math.floor(Date.now() / 1000);
    const id = await w.publish({ tenantId: t.id, type: 'note.created', data });
    const [got] = await r.waitFor(1);
    const receivedBy = Math.ceil(Date.now() / 1000);
    assert.equal(got!.method, 'POST');
    assert.equal(got!.headers['content-type'], 'application/json');
    assert.equal(got!.headers['webhook-id'], id);
    const timestamp = Number(got!.headers['webhook-timestamp']);
    assert.ok(
      sentFrom <= timestamp && timestamp <= receivedBy,
      `webhook-timestamp ${timestamp}: the time it was sent, in seconds`,
    );
    assert.ok(signedBy(got!, ep.signing_secret!), 'the signature verifies with the endpoint secret');
    const body = JSON.parse(got!.body);
    assert.equal(body.type, 'note.created');
    assert.deepEqual(body.data, data);
    const detail = await settled(w, t, id);
    assert.equal(detail.status, WebhookEventStatus.WEBHOOK_EVENT_STATUS_DELIVERED);
    assert.equal(detail.deliveries[0]!.status, SUCCEEDED);
    assert.equal(detail.deliveries[0]!.attempts[0]!.http_status, 200);
    // A later event to the same endpoint arrives: a second send of the first would have come before it.
    const later = await w.publish({ tenantId: t.id, type: 'note.updated' });
    await r.waitFor(2);
    await settled(w, t, later);
    assert.deepEqual(
      r.received.map((x) => x.headers['webhook-id']),
      [id, later],
      'delivered once',
    );
    assert.ok(logs.lines.length > 0, 'the service logged (the capture works)');
    assert.ok(!logs.text().includes(ep.signing_secret!.slice(6)), 'the secret is never logged');
    const { rows } = await w.db.query<{ secret: string }>('SELECT secret FROM webhook_endpoint_secrets');
    assert.ok(
      rows.every((row) => row.secret.startsWith('wk1.') && !row.secret.includes(ep.signing_secret!.slice(6))),
      'stored encrypted',
    );
  });

  it('records nothing for an event no enabled endpoint matches, and sends nothing to a disabled or deleted endpoint', async () => {
    const t = tenant();
    const r = await receiver();
    const disabled = await endpoint(w, t, r.url);
    await w.client.call(
      S.updateWebhookEndpoint,
      { id: disabled.id, is_enabled: false, event_types: [], channels: [], update_mask: ['is_enabled'] },
      t.call,
    );
    const deleted = await endpoint(w, t, r.url);
    await w.client.call(S.deleteWebhookEndpoint, { id: deleted.id }, t.call);
    await endpoint(w, t, r.url, { event_types: ['deal.*'] });
    await w.publish({ tenantId: t.id, type: 'note.created' });
    // A later event the enabled endpoint does match arrives alone: the note event was taken in and sent nowhere.
    const deal = await w.publish({ tenantId: t.id, type: 'deal.created' });
    await r.waitFor(1);
    await settled(w, t, deal);
    assert.deepEqual(
      r.received.map((x) => x.headers['webhook-id']),
      [deal],
    );
    assert.deepEqual(
      (await w.client.call(S.listWebhookEvents, {}, t.call)).data.map((e) => e.id),
      [deal],
    );
  });

  it('retries a 500 on the schedule with the same webhook-id, records each attempt, and fails after the last', async () => {
    const t = tenant();
    const r = await receiver(() => ({ status: 500 }));
    await endpoint(w, t, r.url);
    const id = await w.publish({ tenantId: t.id, type: 'note.updated' });
    const detail = await settled(w, t, id);
    assert.equal(detail.status, WebhookEventStatus.WEBHOOK_EVENT_STATUS_FAILED);
    const d = detail.deliveries[0]!;
    assert.equal(d.status, FAILED);
    assert.equal(d.attempt_count, 3);
    assert.equal(d.next_attempt_at, undefined);
    assert.deepEqual(
      d.attempts.map((a) => a.http_status),
      [500, 500, 500],
    );
    assert.ok(
      d.attempts.every(
        (a) => a.trigger === WebhookAttemptTrigger.WEBHOOK_ATTEMPT_TRIGGER_SCHEDULED && /500/.test(a.error_message!),
      ),
    );
    assert.deepEqual(new Set(r.received.map((x) => x.headers['webhook-id'])), new Set([id]));
    const gaps = [r.received[1]!.at - r.received[0]!.at, r.received[2]!.at - r.received[1]!.at];
    assert.ok(gaps[0]! >= 350 && gaps[1]! >= 750, `the schedule 0, 500 ms, 1 s (±20 %) was kept: ${gaps}`);

    // Retry: the failed delivery goes back to pending, due now, with a fresh schedule.
    r.answer = () => ({ status: 204 });
    const retried = await w.client.call(S.retryWebhookEvent, { id }, t.call);
    assert.equal(retried.requeued, 1);
    const after = await settled(w, t, id);
    assert.equal(after.status, WebhookEventStatus.WEBHOOK_EVENT_STATUS_DELIVERED);
    assert.equal(after.deliveries[0]!.attempt_count, 4);
    assert.equal(after.deliveries[0]!.attempts[3]!.trigger, WebhookAttemptTrigger.WEBHOOK_ATTEMPT_TRIGGER_MANUAL);
    assert.equal((await w.client.call(S.retryWebhookEvent, { id }, t.call)).requeued, 0, 'nothing failed any more');
  });

  it('requeues only the failed deliveries, of enabled endpoints', async () => {
    const t = tenant();
    const ok = await receiver();
    const bad = await receiver(() => ({ status: 500 }));
    const bad2 = await receiver(() => ({ status: 500 }));
    await endpoint(w, t, ok.url);
    await endpoint(w, t, bad.url);
    const off = await endpoint(w, t, bad2.url);
    const id = await w.publish({ tenantId: t.id, type: 'task.created' });
    await settled(w, t, id);
    await w.client.call(
      S.updateWebhookEndpoint,
      { id: off.id, is_enabled: false, event_types: [], channels: [], update_mask: ['is_enabled'] },
      t.call,
    );
    bad.answer = () => ({ status: 200 });
    assert.equal((await w.client.call(S.retryWebhookEvent, { id }, t.call)).requeued, 1);
    await settled(w, t, id);
    assert.equal(ok.received.length, 1, 'the succeeded delivery was not sent again');
  });

  it('counts a timeout as a failed attempt', async () => {
    const t = tenant();
    const r = await receiver((_req, n) => (n === 0 ? { status: 200, delayMs: 3_000 } : { status: 200 }));
    await endpoint(w, t, r.url);
    const id = await w.publish({ tenantId: t.id, type: 'note.updated' });
    const detail = await settled(w, t, id);
    assert.equal(detail.status, WebhookEventStatus.WEBHOOK_EVENT_STATUS_DELIVERED);
    const [first, second] = detail.deliveries[0]!.attempts;
    assert.equal(first!.http_status, undefined);
    assert.match(first!.error_message!, /within 1500 ms/);
    assert.equal(second!.http_status, 200);
  });

  it('waits at least a Retry-After (429), longer than the schedule says', async () => {
    const t = tenant();
    const r = await receiver((_req, n) =>
      n === 0 ? { status: 429, headers: { 'retry-after': '2' } } : { status: 200 },
    );
    await endpoint(w, t, r.url);
    const id = await w.publish({ tenantId: t.id, type: 'note.updated' });
    await settled(w, t, id);
    const gap = r.received[1]!.at - r.received[0]!.at;
    assert.ok(
      gap >= 1_900,
      `second attempt ${Math.round(gap)} ms after the first (Retry-After 2 s; schedule said 500 ms)`,
    );
  });

  it('treats a redirect as a failure and never follows it', async () => {
    const t = tenant();
    const target = await receiver();
    const r = await receiver(() => ({ status: 302, headers: { location: target.url } }));
    await endpoint(w, t, r.url);
    const id = await w.publish({ tenantId: t.id, type: 'note.updated' });
    const detail = await settled(w, t, id);
    assert.equal(detail.status, WebhookEventStatus.WEBHOOK_EVENT_STATUS_FAILED);
    assert.match(detail.deliveries[0]!.attempts[0]!.error_message!, /redirect/);
    assert.equal(target.received.length, 0);
  });

  it('disables the endpoint at once on 410 Gone and fails its other pending deliveries', async () => {
    const t = tenant();
    let gone = false;
    const r = await receiver((_req, n) => (gone ? { status: 410 } : n === 0 ? { status: 500 } : { status: 500 }));
    const ep = await endpoint(w, t, r.url);
    const first = await w.publish({ tenantId: t.id, type: 'note.updated' });
    await r.waitFor(1);
    gone = true;
    const second = await w.publish({ tenantId: t.id, type: 'note.updated' });
    const detail = await settled(w, t, second);
    assert.equal(detail.deliveries[0]!.attempts.at(-1)!.http_status, 410);
    const firstDetail = await settled(w, t, first);
    assert.equal(firstDetail.status, WebhookEventStatus.WEBHOOK_EVENT_STATUS_FAILED);
    const got = await w.client.call(S.getWebhookEndpoint, { id: ep.id }, t.call);
    assert.equal(got.is_enabled, false);
    assert.match(got.disabled_reason!, /410 Gone/);
    assert.ok(got.disabled_at);
    const disabled = (await ownEvents(w, 'webhook_endpoint.disabled')).filter((e) => e.resource?.id === ep.id);
    assert.equal(disabled.length, 1);
    assert.equal(disabled[0]!.actor?.type, 'system');
    const count = r.received.length;
    // Every job of the endpoint's deliveries ran to its end (the failed ones find nothing to send).
    await eventually(
      'no delivery job of the endpoint is left',
      async () =>
        (await w.db.query("SELECT 1 FROM jobs WHERE concurrency_key = $1 AND state IN ('queued', 'running')", [ep.id]))
          .rowCount === 0,
    );
    assert.equal(r.received.length, count, 'no attempt after the 410');
    assert.equal(
      (await w.client.call(S.retryWebhookEvent, { id: first }, t.call)).requeued,
      0,
      'a disabled endpoint is not retried',
    );
    // Enabled again: a fresh start.
    const enabled = await w.client.call(
      S.updateWebhookEndpoint,
      { id: ep.id, is_enabled: true, event_types: [], channels: [], update_mask: ['is_enabled'] },
      t.call,
    );
    assert.equal(enabled.disabled_at, undefined);
    assert.equal(enabled.disabled_reason, undefined);
  });

  it('keeps a slow receiver from holding up a fast one (per-endpoint cap)', async () => {
    // Attempts to the hanging receiver end only when it closes (the timeout is a minute): the fast
    // receiver must get everything while the slow one holds its four slots.
    const capped = await startWebhooks({ settings: { timeoutMs: 60_000 } });
    const slow = await startReceiver(() => ({ status: 200, hang: true }));
    const fast = await startReceiver();
    try {
      const t = tenant();
      const slowEndpoint = await endpoint(capped, t, slow.url);
      await endpoint(capped, t, fast.url);
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) ids.push(await capped.publish({ tenantId: t.id, type: 'note.updated' }));
      await fast.waitFor(12);
      for (const id of ids)
        await eventually(`event ${id} delivered to the fast receiver`, () => delivered(capped, t, id));
      await slow.waitFor(4);
      assert.deepEqual(
        await jobStates(capped, slowEndpoint.id),
        { running: 4, queued: 8 },
        'four attempts in flight to the slow endpoint, the rest waiting for a slot',
      );
      assert.equal(slow.received.length, 4);
    } finally {
      await slow.close();
      await fast.close();
      await capped.stop();
    }
  });

  it("keeps one tenant's many hanging receivers from taking every slot (per-tenant cap)", async () => {
    // 20 endpoints × 4 attempts in flight each would take more than the replica's 64 slots (the
    // attempts hang until the receiver closes); WEBHOOK_TENANT_CONCURRENCY (32) leaves the other
    // tenants room.
    const capped = await startWebhooks({ settings: { timeoutMs: 60_000 } });
    const hanging = await startReceiver(() => ({ status: 200, hang: true }));
    const fast = await startReceiver();
    try {
      const noisy = tenant();
      const quiet = tenant();
      for (let i = 0; i < 20; i++) await endpoint(capped, noisy, `${hanging.url}?e=${i}`);
      await endpoint(capped, quiet, fast.url);
      for (let i = 0; i < 4; i++) await capped.publish({ tenantId: noisy.id, type: 'note.updated' });
      await hanging.waitFor(32);
      for (let i = 0; i < 5; i++) await capped.publish({ tenantId: quiet.id, type: 'note.updated' });
      await fast.waitFor(5);
      const { rows } = await capped.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM jobs WHERE group_key = $1 AND state = 'running'",
        [noisy.id],
      );
      assert.equal(rows[0]!.n, 32, "32 of the noisy tenant's attempts in flight, the rest waiting");
      assert.equal(hanging.received.length, 32, 'while the quiet tenant got all of its deliveries');
    } finally {
      await hanging.close();
      await fast.close();
      await capped.stop();
    }
  });

  it('answers a test delivery: success, the status of a failing receiver, and an unreachable one', async () => {
    const t = tenant();
    const r = await receiver();
    const ep = await endpoint(w, t, r.url);
    const ok = await w.client.call(S.testWebhookEndpoint, { id: ep.id }, t.call);
    assert.equal(ok.success, true);
    assert.equal(ok.http_status, 200);
    assert.equal(typeof ok.response_time_ms, 'number');
    const [got] = await r.waitFor(1);
    assert.ok(signedBy(got!, ep.signing_secret!));
    const body = JSON.parse(got!.body);
    assert.equal(body.type, 'webhook.test');
    assert.deepEqual(body.data, { endpoint_id: ep.id });

    r.answer = () => ({ status: 500 });
    await w.client.call(
      S.updateWebhookEndpoint,
      { id: ep.id, is_enabled: false, event_types: [], channels: [], update_mask: ['is_enabled'] },
      t.call,
    );
    const bad = await w.client.call(S.testWebhookEndpoint, { id: ep.id }, t.call);
    assert.equal(bad.success, false, 'allowed on a disabled endpoint');
    assert.equal(bad.http_status, 500);
    assert.match(bad.error_message!, /500/);
    assert.equal(r.received.length, 2, 'never retried');

    const closed = await receiver();
    await closed.close();
    const gone = await endpoint(w, t, closed.url);
    const unreachable = await w.client.call(S.testWebhookEndpoint, { id: gone.id }, t.call);
    assert.equal(unreachable.success, false);
    assert.equal(unreachable.http_status, undefined);
    assert.equal(unreachable.response_time_ms, undefined);
    assert.match(unreachable.error_message!, /could not reach/);
  });

  it('keeps tenants apart', async () => {
    const a = tenant();
    const b = tenant();
    const r = await receiver();
    const ep = await endpoint(w, a, r.url);
    const id = await w.publish({ tenantId: a.id, type: 'note.created' });
    await settled(w, a, id);
    for (const call of [
      () => w.client.call(S.getWebhookEndpoint, { id: ep.id }, b.call),
      () => w.client.call(S.rotateWebhookEndpointSecret, { id: ep.id }, b.call),
      () => w.client.call(S.deleteWebhookEndpoint, { id: ep.id }, b.call),
      () => w.client.call(S.testWebhookEndpoint, { id: ep.id }, b.call),
      () => w.client.call(S.getWebhookEvent, { id }, b.call),
      () => w.client.call(S.retryWebhookEvent, { id }, b.call),
    ])
      await assert.rejects(call(), /NOT_FOUND|not found/);
    assert.equal((await w.client.call(S.listWebhookEndpoints, {}, b.call)).data.length, 0);
    assert.equal((await w.client.call(S.listWebhookEvents, {}, b.call)).data.length, 0);
    // b's events never reach a's endpoint: a's later event arrives alone.
    await w.publish({ tenantId: b.id, type: 'note.created' });
    const later = await w.publish({ tenantId: a.id, type: 'note.updated' });
    await r.waitFor(2);
    await settled(w, a, later);
    assert.deepEqual(
      r.received.map((x) => x.headers['webhook-id']),
      [id, later],
    );
  });
});

describe('webhook endpoints over time', () => {
  it('auto-disables an endpoint with no success for WEBHOOK_DISABLE_AFTER and emits webhook_endpoint.disabled', async () => {
    const w = await startWebhooks({ settings: { retrySchedule: [0, 1_200], disableAfterMs: 1_000 } });
    const r = await startReceiver(() => ({ status: 503 }));
    try {
      const t = tenant();
      const ep = await endpoint(w, t, r.url);
      const id = await w.publish({ tenantId: t.id, type: 'note.updated' });
      await settled(w, t, id);
      const got = await w.client.call(S.getWebhookEndpoint, { id: ep.id }, t.call);
      assert.equal(got.is_enabled, false);
      assert.match(got.disabled_reason!, /no successful delivery/);
      const disabled = await ownEvents(w, 'webhook_endpoint.disabled');
      assert.equal(disabled.length, 1);
      assert.equal(disabled[0]!.data?.id, ep.id);
      assert.equal(disabled[0]!.data?.is_enabled, false);
      assert.equal(
        'signing_secret' in (disabled[0]!.data ?? {}) && disabled[0]!.data?.signing_secret !== null,
        false,
        'never the secret',
      );
    } finally {
      await r.close();
      await w.stop();
    }
  });

  it('signs with both secrets (new first) during the rotation grace, then with the new one only', async () => {
    const w = await startWebhooks({ settings: { secretGraceMs: 3_600_000 } });
    const r = await startReceiver();
    try {
      const t = tenant();
      const ep = await endpoint(w, t, r.url);
      const rotated = await w.client.call(S.rotateWebhookEndpointSecret, { id: ep.id }, t.call);
      assert.notEqual(rotated.signing_secret, ep.signing_secret);
      assert.equal(
        (await w.client.call(S.getWebhookEndpoint, { id: ep.id }, t.call)).signing_secret,
        undefined,
        'shown only by create and rotate',
      );
      await w.publish({ tenantId: t.id, type: 'note.updated' });
      const [inGrace] = await r.waitFor(1);
      const sigs = signaturesOf(inGrace!);
      assert.equal(sigs.length, 2);
      assert.ok(
        signedBy(
          { ...inGrace!, headers: { ...inGrace!.headers, 'webhook-signature': `v1,${sigs[0]}` } },
          rotated.signing_secret!,
        ),
        'the new secret signs first',
      );
      assert.ok(
        signedBy(
          { ...inGrace!, headers: { ...inGrace!.headers, 'webhook-signature': `v1,${sigs[1]}` } },
          ep.signing_secret!,
        ),
        'the old one second',
      );
      // The old secret's grace is the setting, counted from the rotation; then it ends (moved to the past here).
      const { rows } = await w.db.query<{ grace_ms: number }>(
        `SELECT (extract(epoch FROM old.expires_at - new.created_at) * 1000)::int AS grace_ms
           FROM webhook_endpoint_secrets old, webhook_endpoint_secrets new
          WHERE old.endpoint_id = $1 AND new.endpoint_id = $1 AND old.expires_at IS NOT NULL AND new.expires_at IS NULL`,
        [ep.id],
      );
      assert.deepEqual(rows, [{ grace_ms: 3_600_000 }]);
      await w.db.query(
        `UPDATE webhook_endpoint_secrets SET expires_at = now() - interval '1 second' WHERE endpoint_id = $1 AND expires_at IS NOT NULL`,
        [ep.id],
      );
      await w.publish({ tenantId: t.id, type: 'note.updated' });
      const [, afterGrace] = await r.waitFor(2);
      assert.equal(signaturesOf(afterGrace!).length, 1);
      assert.ok(signedBy(afterGrace!, rotated.signing_secret!));
      assert.ok(!signedBy(afterGrace!, ep.signing_secret!));
    } finally {
      await r.close();
      await w.stop();
    }
  });

  it('deletes events past WEBHOOK_RETENTION_DAYS with their deliveries and attempts, a pending one too, whatever its job', async () => {
    const w = await startWebhooks({ settings: { retrySchedule: [0, 3_600_000] } });
    const ok = await startReceiver();
    const failing = await startReceiver(() => ({ status: 500 }));
    let sweeper: Webhooks | undefined;
    try {
      const t = tenant();
      await endpoint(w, t, ok.url, { event_types: ['note.*'] });
      await endpoint(w, t, failing.url, { event_types: ['task.*'] });
      const oldDelivered = await w.publish({ tenantId: t.id, type: 'note.created' });
      const oldPending = await w.publish({ tenantId: t.id, type: 'task.created' }); // fails once, next attempt in an hour
      const recent = await w.publish({ tenantId: t.id, type: 'note.updated' });
      await settled(w, t, oldDelivered);
      await settled(w, t, recent);
      await eventually(
        'the pending delivery made its first attempt',
        async () =>
          (await w.client.call(S.getWebhookEvent, { id: oldPending }, t.call)).deliveries[0]!.attempt_count === 1,
      );
      const old = (
        await w.db.query<{ id: string; job_id: string; event_id: string }>(
          'SELECT id, job_id, event_id FROM webhook_deliveries WHERE event_id = ANY($1)',
          [[oldDelivered, oldPending]],
        )
      ).rows;
      assert.equal(old.length, 2);
      const pendingJob = old.find((d) => d.event_id === oldPending)!.job_id;
      const jobOf = async (id: string) =>
        (await w.db.query<{ state: string }>('SELECT state FROM jobs WHERE id = $1', [id])).rows[0]?.state;
      assert.equal(await jobOf(pendingJob), 'queued', 'its job waits for the next attempt');
      await w.db.query(`UPDATE webhook_events SET created_at = now() - interval '31 days' WHERE id = ANY($1)`, [
        [oldDelivered, oldPending],
      ]);
      // More old events than one delete takes (10,000): a busy tenant's backlog goes in one sweep, not 10,000 an hour.
      await w.db.query(
        `INSERT INTO webhook_events (id, tenant_id, event_type, channels, payload, created_at)
         SELECT gen_random_uuid(), $1, 'note.created', '{note}', '{}', now() - interval '40 days' FROM generate_series(1, 25000)`,
        [t.id],
      );

      // Another replica starting runs the retention sweep at once.
      sweeper = await startWebhooks({ databaseUrl: w.databaseUrl, settings: { workerConcurrency: 0 } });
      await eventually(
        'the old events are gone',
        async () =>
          (await w.db.query('SELECT 1 FROM webhook_events WHERE id = ANY($1)', [[oldDelivered, oldPending]]))
            .rowCount === 0,
      );
      await eventually(
        'every old event is gone',
        async () =>
          (await w.db.query(`SELECT 1 FROM webhook_events WHERE created_at < now() - interval '30 days' LIMIT 1`))
            .rowCount === 0,
        10_000,
      );
      const ids = old.map((d) => d.id);
      assert.equal(
        (await w.db.query('SELECT 1 FROM webhook_deliveries WHERE id = ANY($1)', [ids])).rowCount,
        0,
        'their deliveries went with them',
      );
      assert.equal(
        (await w.db.query('SELECT 1 FROM webhook_attempts WHERE delivery_id = ANY($1)', [ids])).rowCount,
        0,
        'and their attempts',
      );
      for (const id of [oldDelivered, oldPending])
        assert.equal(
          (await failure(w.client.call(S.getWebhookEvent, { id }, t.call))).reason,
          'WEBHOOK_EVENT_NOT_FOUND',
        );
      const kept = await w.client.call(S.getWebhookEvent, { id: recent }, t.call);
      assert.equal(kept.deliveries[0]!.attempts.length, 1, 'a recent event is kept with its delivery and attempts');

      // The pending delivery's job outlived it: when due, it finds no delivery and does nothing.
      await w.db.query('UPDATE jobs SET next_attempt_at = now() WHERE id = $1', [pendingJob]);
      await eventually('the orphaned job ran', async () => (await jobOf(pendingJob)) === 'succeeded');
      assert.equal(failing.received.length, 1, 'nothing was sent for the deleted delivery');
    } finally {
      await sweeper?.stop();
      await ok.close();
      await failing.close();
      await w.stop();
    }
  });

  it('signs with at most 10 secrets after many rotations within the grace', async () => {
    const w = await startWebhooks();
    const r = await startReceiver();
    try {
      const t = tenant();
      const ep = await endpoint(w, t, r.url);
      let latest = ep.signing_secret!;
      for (let i = 0; i < 12; i++)
        latest = (await w.client.call(S.rotateWebhookEndpointSecret, { id: ep.id }, t.call)).signing_secret!;
      await w.publish({ tenantId: t.id, type: 'note.updated' });
      const [got] = await r.waitFor(1);
      assert.equal(signaturesOf(got!).length, 10);
      assert.ok(
        signedBy({ ...got!, headers: { ...got!.headers, 'webhook-signature': `v1,${signaturesOf(got!)[0]}` } }, latest),
        'the newest first',
      );
      assert.ok(!signedBy(got!, ep.signing_secret!), 'the oldest no longer signs');
    } finally {
      await r.close();
      await w.stop();
    }
  });
});
