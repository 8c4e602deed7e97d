/**
 * The event backbone against real PostgreSQL and (when the run has one: make test starts it) a
 * real Kafka broker: outbox → relay → topics → consumer with dedup and dead letters.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { metrics } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPool, runMigrations, withTransaction, type Pool, type PoolClient } from '@workauto/db';
import { createLogger } from '@workauto/logger';
import { captureLogs, eventually, testDatabase } from '@workauto/testing';
import type { ResourceJson } from '@workauto/protos';
import { Event } from '@workauto/protos/workauto/events/v1/event.js';
import { decodeEvent } from './event.js';
import { KafkaTransport, isRetriableKafkaError } from './kafka-transport.js';
// The error classes are spread into kafkajs's exports, which Node's named-export detection misses.
import kafkajs from 'kafkajs';
import { LocalTransport } from './local-transport.js';
import { OUTBOX_MIGRATIONS, recordEvent } from './outbox.js';
import { OutboxRelay } from './relay.js';
import { startConsumer } from './consumer.js';
import { TOPICS, type EventTransport, type Subscription, type TransportMessage } from './transport.js';

const logger = createLogger('events-test', 'silent');
const brokers = process.env.KAFKA_BROKERS;
const TENANT = '0193a000-0000-7000-8000-000000000001';
const ctx = {
  tenantId: TENANT,
  requestId: 'req-1',
  actor: { type: 'member', id: 'm-1', memberId: 'm-1' },
  clientIp: '10.0.0.9',
  userAgent: 'tests/1.0',
};

async function freshPool(): Promise<Pool> {
  const pool = createPool(await testDatabase('events'));
  await runMigrations(pool, [OUTBOX_MIGRATIONS]);
  await pool.query('CREATE TABLE applied (event_id uuid PRIMARY KEY, type text NOT NULL)');
  return pool;
}

async function record(pool: Pool, n: number, resourceId = 'r-1', type = 'note.updated'): Promise<string[]> {
  return withTransaction(pool, async (tx) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++)
      ids.push(
        await recordEvent(tx, 'test', ctx, {
          type,
          resourceType: 'note',
          resourceId,
          data: { i } as unknown as ResourceJson,
        }),
      );
    return ids;
  });
}

const pending = async (pool: Pool) =>
  (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL')).rows[0]!.n;

/** Every message of some topics, as a raw subscriber sees them. */
async function collect(
  transport: EventTransport,
  topics: string[],
): Promise<{ messages: TransportMessage[]; sub: Subscription }> {
  const messages: TransportMessage[] = [];
  const sub = await transport.subscribe({
    groupId: `collector-${randomBytes(3).toString('hex')}`,
    topics,
    handle: async (batch) => void messages.push(...batch),
  });
  return { messages, sub };
}

describe(
  'event backbone with a real Kafka broker',
  { skip: brokers ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' },
  () => {
    const transports: KafkaTransport[] = [];
    /** A transport in a namespace of its own: fresh topics and consumer groups for each test. */
    const kafka = (extra: Partial<ConstructorParameters<typeof KafkaTransport>[0]> = {}) => {
      const t = new KafkaTransport({
        brokers: brokers!.split(','),
        clientId: 'events-test',
        logger,
        namespace: `t${randomBytes(4).toString('hex')}.`,
        partitions: 3,
        ...extra,
      });
      transports.push(t);
      return t;
    };
    after(async () => {
      for (const t of transports) await t.close();
    });

    it('publishes a committed change to the audit and domain topics, keyed by resource, with its headers', async () => {
      const pool = await freshPool();
      const transport = kafka();
      const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 100 });
      const audit = await collect(transport, [TOPICS.audit]);
      const domain = await collect(transport, [TOPICS.domain]);
      const [id] = await record(pool, 1, 'r-42', 'note.created');
      await eventually('both topics have the event', () => audit.messages.length === 1 && domain.messages.length === 1);
      for (const m of [audit.messages[0]!, domain.messages[0]!]) {
        assert.equal(m.key, 'note:r-42');
        assert.equal(m.headers['event-id'], id);
        assert.equal(m.headers['event-type'], 'note.created');
        assert.equal(m.headers['tenant-id'], TENANT);
        const event = decodeEvent(m.value);
        assert.equal(event.id, id);
        assert.equal(event.type, 'note.created');
        assert.deepEqual(event.actor, { type: 'member', id: 'm-1', member_id: 'm-1' });
        assert.equal(event.request?.ip_address, '10.0.0.9');
        assert.equal(event.request?.user_agent, 'tests/1.0');
        assert.deepEqual(event.data, { i: 0 });
      }
      await eventually('the row is marked published', async () => (await pending(pool)) === 0);
      await Promise.all([audit.sub.stop(), domain.sub.stop(), relay.stop()]);
      await pool.end();
    });

    it('commits what a consumer handled when it stops: the next member of its group starts after it', async () => {
      const t = kafka();
      const message = (i: number) => ({
        topic: 'resume.test',
        key: `k${i}`,
        value: Buffer.from(String(i)),
        headers: {},
      });
      const consume = (seen: string[]) =>
        t.subscribe({
          groupId: 'resume',
          topics: ['resume.test'],
          handle: async (batch) => void seen.push(...batch.map((m) => m.value.toString())),
        });
      const before: string[] = [];
      const first = await consume(before);
      // One publish each, well inside the commit interval: committed only by the stop.
      for (let i = 0; i < 5; i++) await t.publish([message(i)]);
      await eventually('the first member handled the five', () => before.length === 5);
      await first.stop();
      await t.publish([message(5)]);
      const after: string[] = [];
      const second = await consume(after);
      await eventually('the next member handled the sixth', () => after.includes('5'));
      assert.deepEqual(after, ['5'], 'nothing the first member handled was delivered again');
      await second.stop();
    });

    it("reports each consumer group's lag per partition: what is left behind the partition end", async () => {
      const reader = new (class extends MetricReader {
        protected async onForceFlush() {}
        protected async onShutdown() {}
      })();
      metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
      const t = kafka({ partitions: 1 });
      await t.publish(
        Array.from({ length: 150 }, (_, i) => ({
          topic: 'lag.test',
          key: 'k',
          value: Buffer.from(String(i)),
          headers: {},
        })),
      );
      let handled = 0;
      const sub = await t.subscribe({
        groupId: 'lagging',
        topics: ['lag.test'],
        handle: async (batch) => void (handled += batch.length),
      });
      await eventually('every message was handled', () => handled === 150);
      const { resourceMetrics } = await reader.collect();
      const lag = resourceMetrics.scopeMetrics
        .flatMap((m) => m.metrics)
        .find((m) => m.descriptor.name === 'workauto.events.consumer_lag');
      assert.ok(lag, 'the lag gauge was exported');
      assert.deepEqual(
        lag.dataPoints.map((p) => [p.attributes, p.value]),
        [[{ group: 'lagging', topic: 'lag.test', partition: 0 }, 0]],
      );
      metrics.disable();
      await sub.stop();
    });

    it('publishes nothing for a rolled-back change', async () => {
      const pool = await freshPool();
      const transport = kafka();
      const domain = await collect(transport, [TOPICS.domain]);
      await assert.rejects(
        withTransaction(pool, async (tx) => {
          await recordEvent(tx, 'test', ctx, { type: 'note.created', resourceType: 'note', resourceId: 'gone' });
          throw new Error('the change failed');
        }),
        /the change failed/,
      );
      const [marker] = await record(pool, 1, 'marker');
      const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 100 });
      await eventually('the marker arrived', () => domain.messages.some((m) => m.headers['event-id'] === marker));
      assert.deepEqual(
        domain.messages.map((m) => m.key),
        ['note:marker'],
      );
      await Promise.all([domain.sub.stop(), relay.stop()]);
      await pool.end();
    });

    it('keeps events while the broker is unreachable and publishes all 100, in order, once it is back', async () => {
      const pool = await freshPool();
      // A transport whose broker is down (nothing listens on the port).
      const down = kafka({ brokers: ['127.0.0.1:1'] });
      const logs = captureLogs();
      const warnings = createLogger('events-test', 'warn');
      const stalled = new OutboxRelay({ pool, transport: down, source: 'test', logger: warnings, pollMs: 100 });
      stalled.start();
      const ids = await record(pool, 100, 'ordered');
      // The sentinel: the relay tried to publish them and failed (its warning counts them pending).
      await eventually('the relay tried to publish the 100 and failed', () =>
        logs.lines.some((l) => l.includes('events could not be published') && l.includes('"pending":100')),
      ).finally(() => logs.stop());
      assert.equal(await pending(pool), 100, 'nothing is marked published while the broker is down');
      await stalled.stop();

      const up = kafka();
      const domain = await collect(up, [TOPICS.domain]);
      const relay = await OutboxRelay.start({ pool, transport: up, source: 'test', logger, pollMs: 100 });
      await eventually('all 100 arrived', () => domain.messages.length >= 100);
      assert.deepEqual(
        domain.messages.map((m) => m.headers['event-id']),
        ids,
        'one resource: one partition, insert (seq) order',
      );
      await eventually('all are marked published', async () => (await pending(pool)) === 0);
      await Promise.all([domain.sub.stop(), relay.stop()]);
      await pool.end();
    });

    it('republishes after a crash between publish and mark, and the consumer applies each event once', async () => {
      const pool = await freshPool();
      const transport = kafka();
      let deliveries = 0;
      const handled: string[] = [];
      const consumer = await startConsumer({
        transport,
        pool,
        logger,
        groupId: 'applier',
        topics: [TOPICS.domain],
        handle: async (tx, event) => {
          handled.push(event.id);
          await tx.query('INSERT INTO applied (event_id, type) VALUES ($1, $2)', [event.id, event.type]);
        },
      });
      const counting = await collect(transport, [TOPICS.domain]);
      // The broker acknowledged, then the relay "crashed" before it marked the rows.
      const crashing: EventTransport = {
        publish: async (messages) => {
          await transport.publish(messages);
          throw new Error('crashed after the broker acknowledged');
        },
        subscribe: (o) => transport.subscribe(o),
        ensureTopics: (t) => transport.ensureTopics(t),
        close: async () => undefined,
      };
      const ids = await record(pool, 5, 'crash');
      await assert.rejects(
        new OutboxRelay({ pool, transport: crashing, source: 'test', logger }).drainOnce(),
        /crashed/,
      );
      assert.equal(await pending(pool), 5);
      const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 100 });
      await eventually('every event was delivered twice', () => (deliveries = counting.messages.length) >= 10);
      // The sentinel: one more event of the same resource (its partition, after the ten): once it is
      // applied, the consumer has handled every delivery before it.
      const [sentinel] = await record(pool, 1, 'crash');
      await eventually(
        'the event after them was applied',
        async () => (await pool.query('SELECT 1 FROM applied WHERE event_id = $1', [sentinel])).rowCount === 1,
      );
      const applied = await pool.query<{ event_id: string }>('SELECT event_id FROM applied ORDER BY event_id');
      assert.deepEqual(applied.rows.map((r) => r.event_id).sort(), [...ids, sentinel].sort());
      assert.equal(deliveries, 10);
      assert.deepEqual(handled.sort(), [...ids, sentinel].sort(), 'each handled once: the redeliveries were skipped');
      const processed = await pool.query('SELECT 1 FROM processed_events WHERE group_id = $1', ['applier']);
      assert.equal(processed.rowCount, 6);
      await Promise.all([consumer.stop(), counting.sub.stop(), relay.stop()]);
      await pool.end();
    });

    it('moves an event that keeps failing to the dead-letter topic with the reason, and goes on', async () => {
      const pool = await freshPool();
      const transport = kafka();
      const dead = await collect(transport, [TOPICS.deadLetter]);
      const consumer = await startConsumer({
        transport,
        pool,
        logger,
        groupId: 'picky',
        topics: [TOPICS.domain],
        maxAttempts: 3,
        retryDelayMs: 10,
        handle: async (tx, event) => {
          if (event.type === 'note.poison') throw new Error('cannot apply a poison note');
          await tx.query('INSERT INTO applied (event_id, type) VALUES ($1, $2)', [event.id, event.type]);
        },
      });
      const [poison] = await record(pool, 1, 'same', 'note.poison');
      const [good] = await record(pool, 1, 'same', 'note.updated');
      const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 100 });
      await eventually(
        'the next event on the partition was applied',
        async () => (await pool.query('SELECT 1 FROM applied WHERE event_id = $1', [good])).rowCount === 1,
      );
      await eventually('the poison event is in the dead-letter topic', () => dead.messages.length === 1);
      const letter = dead.messages[0]!;
      assert.equal(letter.headers['event-id'], poison);
      assert.equal(letter.headers['dead-letter-reason'], 'cannot apply a poison note');
      assert.equal(letter.headers['dead-letter-group'], 'picky');
      assert.equal(letter.headers['original-topic'], TOPICS.domain);
      await Promise.all([consumer.stop(), dead.sub.stop(), relay.stop()]);
      await pool.end();
    });
    it('publishes large events (a 100,000-character note each) without exceeding the broker message size', async () => {
      const pool = await freshPool();
      const transport = kafka();
      const domain = await collect(transport, [TOPICS.domain]);
      const body = 'é'.repeat(100_000); // 200 kB of UTF-8: the longest note body the API accepts is up to 300 kB
      const ids = await withTransaction(pool, async (tx) => {
        const out: string[] = [];
        for (let i = 0; i < 12; i++)
          out.push(
            await recordEvent(tx, 'test', ctx, {
              type: 'note.updated',
              resourceType: 'note',
              resourceId: 'big',
              data: { body } as unknown as ResourceJson,
            }),
          );
        return out;
      });
      const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 100 });
      await eventually('all 12 arrived', () => domain.messages.length >= 12, 30_000);
      assert.deepEqual(
        domain.messages.map((m) => m.headers['event-id']),
        ids,
      );
      await eventually('all are marked published', async () => (await pending(pool)) === 0);
      await Promise.all([domain.sub.stop(), relay.stop()]);
      await pool.end();
    });

    it('replays a dead letter with scripts/replay-dead-letters.mjs once the cause is fixed, and the consumer applies it', async () => {
      const namespace = `t${randomBytes(4).toString('hex')}.`;
      const pool = await freshPool();
      const transport = kafka({ namespace });
      const dead = await collect(transport, [TOPICS.deadLetter]);
      let broken = true;
      const consumer = await startConsumer({
        transport,
        pool,
        logger,
        groupId: 'replayed',
        topics: [TOPICS.audit],
        maxAttempts: 1,
        retryDelayMs: 1,
        handle: async (tx, event) => {
          if (broken) throw new Error('the audit table is being migrated');
          await tx.query('INSERT INTO applied (event_id, type) VALUES ($1, $2)', [event.id, event.type]);
        },
      });
      const [lost, kept] = await record(pool, 2, 'replay');
      const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 100 });
      await eventually('both are dead-lettered', () => dead.messages.length === 2);
      broken = false;
      const script = fileURLToPath(new URL('../../../scripts/replay-dead-letters.mjs', import.meta.url));
      const run = (...args: string[]) =>
        promisify(execFile)(process.execPath, [script, '--namespace', namespace, ...args], {
          env: { ...process.env, KAFKA_BROKERS: brokers },
        });
      const listed = await run('--dry-run');
      assert.equal(listed.stdout.trim().split('\n').length, 2, listed.stdout);
      await run('--event-id', lost!);
      // The sentinel: an event of the same resource (its partition) published after the replay ended;
      // once it is applied, whatever the replay produced was handled before it.
      const [sentinel] = await record(pool, 1, 'replay');
      const isApplied = async (id: string | undefined) =>
        (await pool.query('SELECT 1 FROM applied WHERE event_id = $1', [id])).rowCount === 1;
      await eventually('the event after the replay was applied', () => isApplied(sentinel));
      assert.equal(await isApplied(lost), true, 'the replayed event was applied');
      assert.equal(await isApplied(kept), false, 'only the event asked for was replayed');
      // Replaying it again (and everything else) applies nothing twice.
      await run('--all');
      await eventually('the other one was applied', () => isApplied(kept));
      assert.equal((await pool.query('SELECT 1 FROM applied')).rowCount, 3);
      await Promise.all([consumer.stop(), dead.sub.stop(), relay.stop()]);
      await pool.end();
    });
  },
);

describe('outbox relay', () => {
  it('never lets two drains publish at once, and keeps each resource in order when the leader loses its connection', async () => {
    const pool = await freshPool();
    const local = new LocalTransport();
    const received: TransportMessage[] = [];
    await local.subscribe({
      groupId: 'order',
      topics: [TOPICS.domain],
      handle: async (batch) => void received.push(...batch),
    });
    let inFlight = 0;
    let maxInFlight = 0;
    const published = { a: 0, b: 0 };
    /** The real in-process transport, slowed down so that overlapping drains would show. */
    const slow = (who: 'a' | 'b'): EventTransport => ({
      publish: async (messages) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        try {
          await sleep(15);
          await local.publish(messages);
          published[who] += messages.length;
        } finally {
          inFlight--;
        }
      },
      subscribe: (o) => local.subscribe(o),
      ensureTopics: async () => undefined,
      close: async () => undefined,
    });
    const a = new OutboxRelay({ pool, transport: slow('a'), source: 'test', logger, pollMs: 200, batchSize: 4 });
    const b = new OutboxRelay({ pool, transport: slow('b'), source: 'test', logger, pollMs: 10, batchSize: 4 });
    a.start();
    await eventually('a leads', () => a.active);
    b.start();
    const ids = new Map<string, string[]>();
    const write = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const resource = `r-${i % 5}`;
        const [id] = await record(pool, 1, resource);
        ids.set(resource, [...(ids.get(resource) ?? []), id!]);
      }
    };
    await write(20);
    // The leader's own connection (the one that LISTENs) dies, as in a failover or a DBA's kill.
    const killed = await pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN outbox' AND datname = current_database() AND pid <> pg_backend_pid()`,
    );
    assert.equal(killed.rowCount, 1, 'one leader connection');
    const before = published.a + published.b;
    await write(80);
    await eventually('everything is published', async () => (await pending(pool)) === 0);
    assert.equal(maxInFlight, 1, 'two drains published at the same time');
    assert.ok(published.a + published.b > before, 'events were published after the kill');
    assert.ok(a.active !== b.active, `exactly one relay leads (a: ${a.active}, b: ${b.active})`);
    for (const [resource, expected] of ids) {
      const seen: string[] = [];
      for (const m of received)
        if (m.key === `note:${resource}` && !seen.includes(m.headers['event-id']!)) seen.push(m.headers['event-id']!);
      assert.deepEqual(seen, expected, `${resource}: events in the order they were recorded`);
    }
    await Promise.all([a.stop(), b.stop()]);
    await pool.end();
  });

  it('publishes commits that land while it drains, and batches past one drain, without waiting for its poll', async () => {
    const pool = await freshPool();
    const local = new LocalTransport();
    const received = new Set<string>();
    await local.subscribe({
      groupId: 'wake',
      topics: [TOPICS.domain],
      handle: async (batch) => void batch.forEach((m) => received.add(m.headers['event-id']!)),
    });
    // Each publish takes 20 ms, so writers commit while a drain runs; the poll (60 s) never fires.
    const slow: EventTransport = {
      publish: async (messages) => {
        await sleep(20);
        await local.publish(messages);
      },
      subscribe: (o) => local.subscribe(o),
      ensureTopics: async () => undefined,
      close: async () => undefined,
    };
    const [before] = await record(pool, 1, 'before-the-relay');
    const relay = new OutboxRelay({ pool, transport: slow, source: 'test', logger, pollMs: 60_000, batchSize: 5 });
    relay.start();
    try {
      // The sentinel: its first drain (less than a batch: it then waits) published what was there
      // before; from now on only a NOTIFY wakes it.
      await eventually('its first drain published the event recorded before it started', () => received.has(before!));
      // 12 in one transaction (one NOTIFY, more than a batch: the relay must go on draining by itself).
      const burst = await record(pool, 12);
      await eventually('the whole burst is published', () => burst.every((id) => received.has(id)));
      // Then one every few ms: most commit while a drain runs, and the last one's NOTIFY is the last.
      const trickle: string[] = [];
      for (let i = 0; i < 30; i++) {
        trickle.push(...(await record(pool, 1, `r-${i}`)));
        await sleep(i % 3);
      }
      await eventually('every event of the trickle is published', () => trickle.every((id) => received.has(id)));
    } finally {
      await relay.stop();
      await pool.end();
    }
  });

  it('waits lingerMs after the commit that woke it, so a commit just after goes out in the same publish', async () => {
    const pool = await freshPool();
    const local = new LocalTransport();
    const publishes: string[][] = [];
    const counting: EventTransport = {
      publish: async (messages) => {
        publishes.push([...new Set(messages.map((m) => m.headers['event-id']!))]);
        await local.publish(messages);
      },
      subscribe: (o) => local.subscribe(o),
      ensureTopics: async () => undefined,
      close: async () => undefined,
    };
    const [before] = await record(pool, 1, 'before-the-relay');
    // The poll (60 s) never fires: only a NOTIFY wakes it.
    const relay = new OutboxRelay({
      pool,
      transport: counting,
      source: 'test',
      logger,
      pollMs: 60_000,
      lingerMs: 1_500,
    });
    relay.start();
    try {
      await eventually('its first drain published what was there before', () => publishes.flat().includes(before!));
      const [first] = await record(pool, 1, 'first');
      // Long enough for a drain woken at once to have published the first alone; well inside the linger.
      await sleep(50);
      const [second] = await record(pool, 1, 'second');
      await eventually('both are published', () => publishes.flat().includes(second!));
      assert.deepEqual(publishes.slice(1), [[first, second]], 'the two commits went out in one publish');
    } finally {
      await relay.stop();
      await pool.end();
    }
  });

  it('lets one relay per database be active, and another takes over when it stops', async () => {
    const pool = await freshPool();
    const transport = new LocalTransport();
    // The second on a pool of its own, as in another replica: each of its checkouts is a try to lead.
    const secondPool = createPool(pool.options.connectionString!);
    let tries = 0;
    secondPool.on('acquire', () => tries++);
    const first = new OutboxRelay({ pool, transport, source: 'test', logger, pollMs: 50 });
    const second = new OutboxRelay({ pool: secondPool, transport, source: 'test', logger, pollMs: 50 });
    try {
      first.start();
      await eventually('the first is active', () => first.active);
      second.start();
      // The sentinel: a second try began, so the first one ended.
      await eventually('the second tried to lead twice', () => tries >= 2);
      assert.equal(second.active, false);
      await first.stop();
      await eventually('the second took over', () => second.active);
    } finally {
      await Promise.all([first.stop(), second.stop()]);
      await Promise.all([pool.end(), secondPool.end()]);
    }
  });
});

describe('consumer', () => {
  it('reads data and metadata from their JSON text only, never from the deprecated Structs', () => {
    const both = Event.encode({
      ...Event.fromPartial({ id: '0193a000-0000-7000-8000-0000000000aa', type: 'note.updated', tenant_id: TENANT }),
      // eslint-disable-next-line @typescript-eslint/no-deprecated
      data: { id: 'old' },
      // eslint-disable-next-line @typescript-eslint/no-deprecated
      metadata: { title: 'old' },
      data_json: JSON.stringify({ id: 'n-1' }),
      metadata_json: JSON.stringify({ title: 'x' }),
    }).finish();
    assert.deepEqual([decodeEvent(both).data, decodeEvent(both).metadata], [{ id: 'n-1' }, { title: 'x' }]);
    const structsOnly = Event.encode({
      ...Event.fromPartial({ id: '0193a000-0000-7000-8000-0000000000ab', type: 'note.deleted', tenant_id: TENANT }),
      // eslint-disable-next-line @typescript-eslint/no-deprecated
      data: { id: 'old' },
      // eslint-disable-next-line @typescript-eslint/no-deprecated
      metadata: { title: 'old' },
    }).finish();
    assert.deepEqual([decodeEvent(structsOnly).data, decodeEvent(structsOnly).metadata], [undefined, {}]);
  });

  it('applies an event whose metadata and data are nested 40 deep (no decoder depth limit)', async () => {
    const pool = await freshPool();
    const transport = new LocalTransport(10);
    const dead = await collect(transport, [TOPICS.deadLetter]);
    let deep: Record<string, unknown> = { leaf: true };
    for (let i = 0; i < 40; i++) deep = { nested: deep };
    const seen: unknown[] = [];
    const consumer = await startConsumer({
      transport,
      pool,
      logger,
      groupId: 'deep',
      topics: [TOPICS.audit],
      maxAttempts: 1,
      retryDelayMs: 1,
      handle: async (tx, event) => {
        seen.push(event.metadata, event.data);
        await tx.query('INSERT INTO applied (event_id, type) VALUES ($1, $2)', [event.id, event.type]);
      },
    });
    const id = await withTransaction(pool, (tx) =>
      recordEvent(tx, 'test', ctx, {
        type: 'member.updated',
        resourceType: 'member',
        resourceId: 'm-9',
        data: { metadata: deep } as unknown as ResourceJson,
        metadata: { metadata: deep },
      }),
    );
    const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 50 });
    await eventually(
      'the event was applied',
      async () => (await pool.query('SELECT 1 FROM applied WHERE event_id = $1', [id])).rowCount === 1,
    );
    assert.deepEqual(seen, [{ metadata: deep }, { metadata: deep }]);
    assert.equal(dead.messages.length, 0);
    await Promise.all([relay.stop(), consumer.stop(), dead.sub.stop()]);
    await pool.end();
  });

  it('logs an error naming the event and counts it in a metric when it dead-letters one', async () => {
    // A meter provider registered after @workauto/events loaded, as the services' telemetry does.
    const reader = new (class extends MetricReader {
      protected async onForceFlush() {}
      protected async onShutdown() {}
    })();
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
    const pool = await freshPool();
    const transport = new LocalTransport(10);
    const dead = await collect(transport, [TOPICS.deadLetter]);
    const logs = captureLogs();
    const loud = createLogger('events-test', 'info');
    const consumer = await startConsumer({
      transport,
      pool,
      logger: loud,
      groupId: 'failing',
      topics: [TOPICS.audit],
      maxAttempts: 2,
      retryDelayMs: 1,
      handle: async () => {
        throw new Error('cannot apply this one');
      },
    });
    const [id] = await record(pool, 1, 'doomed');
    const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 50 });
    await eventually('the event is in the dead-letter topic', () => dead.messages.length === 1);
    await eventually('the error is logged', () => logs.lines.some((l) => l.includes(id!)));
    logs.stop();
    const line = logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event_id === id);
    assert.ok(line, 'a log line names the event');
    assert.equal(line.level, 'error', 'at error level');
    assert.equal(line.reason, 'cannot apply this one');
    assert.match(String(line.msg), /replay/);
    const { resourceMetrics } = await reader.collect();
    const counter = resourceMetrics.scopeMetrics
      .flatMap((m) => m.metrics)
      .find((m) => m.descriptor.name === 'workauto.events.dead_lettered');
    assert.ok(counter, 'the dead-letter counter was exported');
    assert.deepEqual(
      counter.dataPoints.map((p) => [p.attributes, p.value]),
      [[{ group: 'failing', topic: TOPICS.audit }, 1]],
    );
    metrics.disable();
    await Promise.all([relay.stop(), consumer.stop(), dead.sub.stop()]);
    await pool.end();
  });

  it('prunes processed event ids older than twice the retention, and still skips a redelivery within it', async () => {
    const pool = await freshPool();
    const transport = new LocalTransport(10);
    const options = {
      transport,
      pool,
      logger,
      groupId: 'pruner',
      topics: [TOPICS.audit],
      handle: async (tx: PoolClient, event: { id: string; type: string }) => {
        await tx.query(
          "INSERT INTO applied (event_id, type) VALUES ($1, $2) ON CONFLICT (event_id) DO UPDATE SET type = applied.type || '+again'",
          [event.id, event.type],
        );
      },
    };
    let consumer = await startConsumer(options);
    const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 50 });
    const [recent, old] = await record(pool, 2, 'aged');
    await eventually('both applied', async () => (await pool.query('SELECT 1 FROM applied')).rowCount === 2);
    // 13 days ago is within twice the 7-day retention; 15 days is beyond it.
    await pool.query(`UPDATE processed_events SET processed_at = now() - interval '13 days' WHERE event_id = $1`, [
      recent,
    ]);
    await pool.query(`UPDATE processed_events SET processed_at = now() - interval '15 days' WHERE event_id = $1`, [
      old,
    ]);
    await pool.query(
      `INSERT INTO processed_events (group_id, event_id, processed_at) VALUES ('another-group', $1, now() - interval '30 days')`,
      [old],
    );
    await consumer.stop();
    consumer = await startConsumer(options); // prunes at start, then hourly
    const left = await pool.query<{ group_id: string; event_id: string }>(
      'SELECT group_id, event_id FROM processed_events ORDER BY group_id',
    );
    assert.deepEqual(
      left.rows.map((r) => [r.group_id, r.event_id]),
      [
        ['another-group', old],
        ['pruner', recent],
      ],
      "only this group's ids beyond the window are gone",
    );
    // A redelivery of the recent event is still skipped.
    await pool.query('UPDATE outbox SET published_at = NULL WHERE id = $1', [recent]);
    await relay.drainOnce();
    const applied = await pool.query<{ type: string }>('SELECT type FROM applied WHERE event_id = $1', [recent]);
    assert.equal(applied.rows[0]!.type, 'note.updated', 'applied once');
    await Promise.all([relay.stop(), consumer.stop()]);
    await pool.end();
  });
});

describe('in-process transport (make dev without Kafka)', () => {
  it('does not dead-letter events while the database is away: they wait and are applied once it is back', async () => {
    const pool = await freshPool();
    const transport = new LocalTransport(10);
    const dead = await collect(transport, [TOPICS.deadLetter]);
    let outages = 8; // more than the consumer's own tries
    const consumer = await startConsumer({
      transport,
      pool,
      logger,
      groupId: 'patient',
      topics: [TOPICS.audit],
      maxAttempts: 2,
      retryDelayMs: 5,
      handle: async (tx, event) => {
        if (outages-- > 0)
          throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
        await tx.query('INSERT INTO applied (event_id, type) VALUES ($1, $2)', [event.id, event.type]);
      },
    });
    const [id] = await record(pool, 1, 'patient');
    const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 50 });
    await eventually(
      'the event was applied',
      async () => (await pool.query('SELECT 1 FROM applied WHERE event_id = $1', [id])).rowCount === 1,
    );
    assert.equal(dead.messages.length, 0, 'nothing went to the dead-letter topic');
    await relay.stop();
    await consumer.stop();
    await dead.sub.stop();
    await pool.end();
  });

  it('applies each committed event once, retrying a failing handler, and skips a redelivery', async () => {
    const pool = await freshPool();
    const transport = new LocalTransport(10);
    let failures = 2;
    const consumer = await startConsumer({
      transport,
      pool,
      logger,
      groupId: 'local',
      topics: [TOPICS.audit],
      maxAttempts: 3,
      retryDelayMs: 10,
      handle: async (tx, event) => {
        if (failures-- > 0) throw new Error('database hiccup');
        await tx.query('INSERT INTO applied (event_id, type) VALUES ($1, $2)', [event.id, event.type]);
      },
    });
    const ids = await record(pool, 3, 'local');
    const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 50 });
    await eventually('all three applied', async () => (await pool.query('SELECT 1 FROM applied')).rowCount === 3);
    await eventually('all marked published', async () => (await pending(pool)) === 0);
    // A redelivery (e.g. the relay died before marking) is skipped by the consumer's dedup.
    await pool.query('UPDATE outbox SET published_at = NULL');
    await relay.drainOnce();
    const applied = await pool.query<{ event_id: string }>('SELECT event_id FROM applied');
    assert.deepEqual(applied.rows.map((r) => r.event_id).sort(), [...ids].sort());
    await relay.stop();
    await consumer.stop();
    await pool.end();
  });
});

/** Records an applied event (the tests' handler). */
const applyInto = async (tx: PoolClient, event: { id: string; type: string }): Promise<void> => {
  await tx.query('INSERT INTO applied (event_id, type) VALUES ($1, $2)', [event.id, event.type]);
};

/** The audit topic on the in-process transport: `events` recorded (seen first by `recorded`), relayed, then redelivered once. */
async function relayTwice(
  pool: Pool,
  transport: LocalTransport,
  events: number,
  resource: string,
  recorded: (ids: string[]) => void = () => undefined,
) {
  const ids = await record(pool, events, resource);
  recorded(ids);
  const relay = await OutboxRelay.start({ pool, transport, source: 'test', logger, pollMs: 50 });
  return {
    ids,
    redeliver: async (applied: number) => {
      await eventually('applied', async () => (await pool.query('SELECT 1 FROM applied')).rowCount === applied);
      await eventually('all marked published', async () => (await pending(pool)) === 0);
      await pool.query('UPDATE outbox SET published_at = NULL');
      await relay.drainOnce();
      await relay.stop();
    },
  };
}

describe('consumer options', () => {
  it('relevant(): applies the events it names, once, and skips the others without a processed_events row', async () => {
    const pool = await freshPool();
    const transport = new LocalTransport(10);
    let wanted = new Set<string>();
    const consumer = await startConsumer({
      transport,
      pool,
      logger,
      groupId: 'relevant',
      topics: [TOPICS.audit],
      relevant: async (db, events) => {
        await db.query('SELECT 1'); // one query per batch, as webhooks' tenants-with-endpoints
        return new Set(events.filter((e) => wanted.has(e.id)).map((e) => e.id));
      },
      handle: applyInto,
    });
    const run = await relayTwice(pool, transport, 6, 'relevant', (ids) => {
      wanted = new Set(ids.filter((_, i) => i % 3 === 0));
    });
    await run.redeliver(2);
    await consumer.stop();
    const applied = await pool.query<{ event_id: string }>('SELECT event_id FROM applied');
    assert.deepEqual(applied.rows.map((r) => r.event_id).sort(), [...wanted].sort());
    const marked = await pool.query<{ event_id: string }>(
      "SELECT event_id FROM processed_events WHERE group_id = 'relevant'",
    );
    assert.deepEqual(
      marked.rows.map((r) => r.event_id).sort(),
      [...wanted].sort(),
      'only the applied ones are recorded',
    );
    await pool.end();
  });

  it('handleBatch(): a batch in one idempotent statement, each event once, and one at a time after a batch fails', async () => {
    const pool = await freshPool();
    const transport = new LocalTransport(10);
    const calls: number[] = [];
    const handled = new Map<string, number>(); // event id → statements that carried it
    let failOnce = true;
    const dead = await collect(transport, [TOPICS.deadLetter]);
    const consumer = await startConsumer({
      transport,
      pool,
      logger,
      groupId: 'batched',
      topics: [TOPICS.audit],
      retryDelayMs: 10,
      handleBatch: async (db, events) => {
        calls.push(events.length);
        if (failOnce && events.length > 1) {
          failOnce = false;
          throw new Error('one statement for the batch failed');
        }
        // Keyed by the event id, as the audit log's insert: a redelivery changes nothing.
        await db.query(
          `INSERT INTO applied (event_id, type) SELECT * FROM unnest($1::uuid[], $2::text[]) ON CONFLICT (event_id) DO NOTHING`,
          [events.map((e) => e.id), events.map((e) => e.type)],
        );
        for (const e of events) handled.set(e.id, (handled.get(e.id) ?? 0) + 1);
      },
    });
    const run = await relayTwice(pool, transport, 5, 'batched');
    await run.redeliver(5);
    await eventually('the redelivered events reached the handler', () => run.ids.every((id) => handled.get(id) === 2));
    await consumer.stop();
    await dead.sub.stop();
    const applied = await pool.query<{ event_id: string }>('SELECT event_id FROM applied');
    assert.deepEqual(applied.rows.map((r) => r.event_id).sort(), [...run.ids].sort(), 'each event once');
    assert.ok(calls[0]! > 1, `the first batch came in one call: ${calls.join(', ')}`);
    assert.ok(calls.slice(1).includes(1), `after it failed, its events came one at a time: ${calls.join(', ')}`);
    assert.equal(dead.messages.length, 0, 'nothing dead-lettered: a redelivery is no error');
    const recorded = await pool.query(`SELECT 1 FROM processed_events WHERE group_id = 'batched'`);
    assert.equal(recorded.rowCount, 0, 'its key is the record: no processed_events rows');
    await pool.end();
  });
});

describe('which Kafka failures a start waits out', () => {
  const protocolError = (code: number) =>
    new kafkajs.KafkaJSProtocolError({
      ...{
        [-1]: { type: 'UNKNOWN', retriable: false },
        3: { type: 'UNKNOWN_TOPIC_OR_PARTITION', retriable: true },
        8: { type: 'BROKER_NOT_AVAILABLE', retriable: false },
        27: { type: 'REBALANCE_IN_PROGRESS', retriable: false },
        29: { type: 'TOPIC_AUTHORIZATION_FAILED', retriable: false },
        38: { type: 'INVALID_REPLICATION_FACTOR', retriable: false },
      }[code]!,
      code,
      message: {
        [-1]: 'The server experienced an unexpected error when processing the request',
        3: 'This server does not host this topic-partition',
        8: 'The broker is not available',
        27: 'The group is rebalancing, so a rejoin is needed',
        29: 'Not authorized to access topics: [Topic authorization failed]',
        38: 'Replication-factor is invalid',
      }[code]!,
    } as never);

  /** kafkajs's types declare these constructors without arguments; at run time they take a message. */
  const kafkaError = (type: unknown, message: string) => new (type as new (m: string) => Error)(message);

  it('waits out a topic whose leader is still being elected, also wrapped in kafkajs retries, and its own timeouts', () => {
    const notHosted = protocolError(3);
    assert.equal(isRetriableKafkaError(notHosted), true);
    assert.equal(
      isRetriableKafkaError(new kafkajs.KafkaJSNumberOfRetriesExceeded(notHosted, { retryCount: 5, retryTime: 3_000 })),
      true,
    );
    assert.equal(
      isRetriableKafkaError(kafkaError(kafkajs.KafkaJSTimeout, 'Timed out while waiting for topic leaders')),
      true,
    );
    assert.equal(
      isRetriableKafkaError(new kafkajs.KafkaJSConnectionError('Connection error: connect ECONNREFUSED')),
      true,
    );
  });

  it('waits out what a broker answers while it recovers from a pause, though kafkajs calls it final', () => {
    for (const code of [-1, 8, 27]) {
      assert.equal(isRetriableKafkaError(protocolError(code)), true, protocolError(code).message);
      const wrapped = new kafkajs.KafkaJSNumberOfRetriesExceeded(protocolError(code), {
        retryCount: 3,
        retryTime: 2_000,
      });
      assert.equal(isRetriableKafkaError(wrapped), true);
    }
    assert.equal(
      isRetriableKafkaError(new kafkajs.KafkaJSRequestTimeoutError('Request Metadata(key: 3, version: 6) timed out')),
      true,
    );
  });

  it('fails at once on what waiting cannot fix', () => {
    assert.equal(isRetriableKafkaError(protocolError(38)), false);
    assert.equal(isRetriableKafkaError(protocolError(29)), false);
    assert.equal(
      isRetriableKafkaError(
        new kafkajs.KafkaJSNumberOfRetriesExceeded(protocolError(29), { retryCount: 3, retryTime: 2_000 }),
      ),
      false,
    );
    assert.equal(
      isRetriableKafkaError(
        new kafkajs.KafkaJSConnectionError('Connection error: self-signed certificate in certificate chain'),
      ),
      false,
    );
    assert.equal(
      isRetriableKafkaError(kafkaError(kafkajs.KafkaJSSASLAuthenticationError, 'SASL SCRAM authentication failed')),
      false,
    );
    assert.equal(isRetriableKafkaError(new Error('a bug in a consumer')), false);
  });
});
