/**
 * kafkajs's per-connection timer runs only while a request waits (kafkajs-idle-timer.ts). The
 * first test shows the defect in kafkajs as released, so it must run before anything installs the
 * change; the second, against a real broker, leaves the installing to KafkaTransport, which this
 * file imports there, lazily.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it, mock } from 'node:test';
import { createLogger } from '@workauto/logger';
import { KafkaRequestQueueClass, stopIdleRequestQueueTimers, type KafkaRequestQueue } from './kafkajs-idle-timer.js';
import { TOPICS } from './transport.js';

const brokers = process.env.KAFKA_BROKERS;
const silent = { debug() {}, info() {}, warn() {}, error() {} };

function queue(): KafkaRequestQueue & { throttledUntil: number; push(request: unknown): void } {
  return new KafkaRequestQueueClass({
    maxInFlightRequests: null,
    requestTimeout: 30_000,
    enforceRequestTimeout: false,
    clientId: 'test',
    broker: 'localhost:9092',
    logger: silent,
  }) as never;
}

/** A request as kafkajs's connection pushes it; `sent` counts its sends. */
function request(correlationId: number) {
  const sent = { count: 0 };
  return {
    sent,
    pushed: {
      entry: { correlationId, apiName: 'Fetch', apiKey: 1, apiVersion: 11 },
      expectResponse: true,
      sendRequest: () => void sent.count++,
    },
  };
}

describe('kafkajs request queue timer', () => {
  it('kafkajs as released arms a timer with no request waiting (the defect this module stops)', () => {
    const q = queue();
    q.checkPendingRequests(); // what every response runs
    try {
      assert.notEqual(
        q.throttleCheckTimeoutId,
        null,
        'kafkajs no longer arms its timer with nothing waiting: the defect is fixed upstream, and kafkajs-idle-timer.ts can go',
      );
    } finally {
      clearTimeout(q.throttleCheckTimeoutId ?? undefined);
    }
  });

  it(
    "KafkaTransport installs the change: a real broker's connections keep no timer after their responses",
    { skip: brokers ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' },
    async () => {
      const { KafkaTransport } = await import('./kafka-transport.js');
      const queues = new Set<KafkaRequestQueue>();
      const proto = KafkaRequestQueueClass.prototype as KafkaRequestQueue & { fulfillRequest(r: unknown): void };
      const fulfill = proto.fulfillRequest;
      mock.method(proto, 'fulfillRequest', function (this: KafkaRequestQueue, r: unknown) {
        queues.add(this);
        fulfill.call(this, r);
      });
      const transport = new KafkaTransport({
        brokers: brokers!.split(','),
        clientId: 'idle-timer-test',
        logger: createLogger('idle-timer-test', 'silent'),
        namespace: `t${randomBytes(4).toString('hex')}.`,
        partitions: 1,
      });
      try {
        await transport.publish([{ topic: TOPICS.domain, key: 'k', value: Buffer.from('{}'), headers: {} }]);
        assert.ok(queues.size > 0, 'the publish went through kafkajs request queues');
        for (const q of queues) assert.equal(q.throttleCheckTimeoutId, null, 'a connection kept its timer armed');
      } finally {
        mock.restoreAll();
        await transport.close();
      }
    },
  );

  it('with the change, a response leaves no timer behind when no request waits', () => {
    stopIdleRequestQueueTimers();
    stopIdleRequestQueueTimers(); // idempotent: every transport calls it
    const q = queue();
    q.checkPendingRequests();
    assert.equal(
      q.throttleCheckTimeoutId,
      null,
      "the queue armed its timer with nothing waiting: kafkajs's RequestQueue changed, look at kafkajs-idle-timer.ts again",
    );
  });

  it('with the change, a request held back by throttling is still sent when the throttle ends', (t) => {
    stopIdleRequestQueueTimers();
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const q = queue();
    q.throttledUntil = Date.now() + 50; // a broker's throttle time, as maybeThrottle sets it
    const held = request(1);
    q.push(held.pushed);
    assert.equal(held.sent.count, 0, 'held back while throttled');
    assert.notEqual(q.throttleCheckTimeoutId, null, 'a timer for the throttle’s end');
    t.mock.timers.tick(49);
    assert.equal(held.sent.count, 0);
    t.mock.timers.tick(1);
    assert.equal(held.sent.count, 1, 'sent when the throttle ended');
    assert.equal(q.throttleCheckTimeoutId, null, 'and no timer left once nothing waits');
  });
});
