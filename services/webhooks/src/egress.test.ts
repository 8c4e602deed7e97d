/**
 * The egress policy with EGRESS_ALLOW_PRIVATE=false (the chart's default): every refused form is a
 * 400 naming `url` when written, and a host name that resolves to a private address (DNS
 * rebinding) is refused at connect time, on the address actually dialled. The test resolver maps
 * `rebind.test` to 127.0.0.1, where a receiver listens that must see nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EgressPolicy } from '@workauto/egress';
import { eventually } from '@workauto/testing';
import { WebhookEventStatus } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { failure, S, startWebhooks, tenant } from './test-support.js';
import { startReceiver, type Receiver } from './testing/receiver.js';

const REFUSED = [
  'http://hooks.example.com/x', // plain http
  'ftp://hooks.example.com/x',
  'https://user:pw@hooks.example.com/x',
  `https://hooks.example.com/${'a'.repeat(2_100)}`,
  'https://localhost/x',
  'https://api.localhost/x',
  'https://LOCALHOST./x',
  'https://127.0.0.1/x',
  'https://10.1.2.3/x',
  'https://172.16.0.1/x',
  'https://192.168.1.1/x',
  'https://169.254.169.254/latest/meta-data',
  'https://100.64.0.1/x',
  'https://0.0.0.0/x',
  'https://192.0.0.1/x',
  'https://198.18.0.1/x',
  'https://224.0.0.1/x',
  'https://240.0.0.1/x',
  'https://[::]/x',
  'https://[::1]/x',
  'https://[fe80::1]/x',
  'https://[fc00::1]/x',
  'https://[fd12::1]/x',
  'https://[::ffff:127.0.0.1]/x',
  'https://[::ffff:a9fe:a9fe]/x',
  'https://[2002:7f00:1::]/x',
  'https://[64:ff9b::a00:1]/x',
  'https://2130706433/x',
  'https://0x7f.1/x',
  'https://017700000001/x',
  'https://0x7f000001/x',
];

describe('egress policy of webhook endpoints (EGRESS_ALLOW_PRIVATE=false)', () => {
  let w: Awaited<ReturnType<typeof startWebhooks>>;
  let receiver: Receiver;
  const t = tenant();
  before(async () => {
    receiver = await startReceiver();
    const egress = new EgressPolicy({
      allowPrivate: false,
      resolve: async (host) =>
        host === 'rebind.test' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '93.184.215.14', family: 4 }],
    });
    w = await startWebhooks({ egress });
  });
  after(async () => {
    await receiver.close();
    await w.stop();
  });

  it('refuses every private, loopback, metadata and malformed destination when written (400 naming url)', async () => {
    for (const url of REFUSED) {
      const err = await failure(w.client.call(S.createWebhookEndpoint, { url, event_types: [], channels: [] }, t.call));
      assert.equal(err.reason, 'INVALID_ARGUMENT', url);
      assert.deepEqual(
        err.fieldViolations.map((v) => v.field),
        ['url'],
        url,
      );
    }
    const ok = await w.client.call(
      S.createWebhookEndpoint,
      { url: 'https://hooks.example.com/x', event_types: [], channels: [] },
      t.call,
    );
    const patched = await failure(
      w.client.call(
        S.updateWebhookEndpoint,
        { id: ok.id, url: 'https://10.0.0.1/x', event_types: [], channels: [], update_mask: ['url'] },
        t.call,
      ),
    );
    assert.deepEqual(
      patched.fieldViolations.map((v) => v.field),
      ['url'],
    );
  });

  it('refuses whitespace and control characters in url (400 naming url) on create and patch, and stores nothing', async () => {
    const u = tenant();
    const ok = await w.client.call(
      S.createWebhookEndpoint,
      { url: 'https://hooks.example.com/ok', event_types: [], channels: [] },
      u.call,
    );
    for (const url of [
      'https://hooks.example.com/a\r\nX-Injected: 1',
      'https://hooks.example.com/x\r\n',
      ' https://hooks.example.com/x',
      'https://hooks.example.com/a b',
      'https://hooks.example.com/a\tb',
      'https://hooks.example.com/\u0000',
    ]) {
      for (const call of [
        w.client.call(S.createWebhookEndpoint, { url, event_types: [], channels: [] }, u.call),
        w.client.call(
          S.updateWebhookEndpoint,
          { id: ok.id, url, event_types: [], channels: [], update_mask: ['url'] },
          u.call,
        ),
      ]) {
        const err = await failure(call);
        assert.equal(err.reason, 'INVALID_ARGUMENT', JSON.stringify(url));
        assert.deepEqual(
          err.fieldViolations.map((v) => [v.field, v.description]),
          [['url', 'must not contain whitespace or control characters; percent-encode them (a space is %20)']],
        );
      }
    }
    const { rows } = await w.db.query('SELECT url FROM webhook_endpoints WHERE tenant_id = $1', [u.id]);
    assert.deepEqual(rows, [{ url: 'https://hooks.example.com/ok' }]);
  });

  it('refuses at connect time a name that resolves to a private address; the receiver sees nothing', async () => {
    const port = new URL(receiver.url).port;
    const ep = await w.client.call(
      S.createWebhookEndpoint,
      { url: `https://rebind.test:${port}/hook`, event_types: ['note.*'], channels: [] },
      t.call,
    );
    const test = await w.client.call(S.testWebhookEndpoint, { id: ep.id }, t.call);
    assert.equal(test.success, false);
    // The rule that refused it, never the address the name resolved to (members read attempts).
    assert.match(
      test.error_message!,
      /destination not allowed: the host rebind\.test resolves to a loopback address, which the egress policy refuses; /,
    );
    assert.equal(test.error_message!.includes('127.0.0.1'), false, test.error_message);
    assert.equal(test.http_status, undefined);
    const id = await w.publish({ tenantId: t.id, type: 'note.created' });
    await eventually('the attempt is recorded', async () => {
      const d = await w.client.call(S.getWebhookEvent, { id }, t.call);
      return (d.deliveries[0]?.attempts.length ?? 0) > 0;
    });
    const detail = await w.client.call(S.getWebhookEvent, { id }, t.call);
    const stored = detail.deliveries[0]!.attempts[0]!.error_message!;
    assert.match(stored, /destination not allowed: the host rebind\.test resolves to a loopback address/);
    assert.equal(stored.includes('127.0.0.1'), false, stored);
    assert.notEqual(detail.status, WebhookEventStatus.WEBHOOK_EVENT_STATUS_DELIVERED);
    assert.equal(receiver.received.length, 0);
  });
});
