#!/usr/bin/env node
/**
 * Replays dead-lettered events: reads workauto.dead-letter.v1 from its beginning up to now and
 * produces each matching message back to its `original-topic` (same key, value and headers, minus
 * the dead-letter-* ones, plus `replayed-at`). Consumers skip events they applied already (they
 * dedup on the event id), so replaying a message twice, or one another group applied, is harmless.
 * Fix the cause first (the `dead-letter-reason` header and the consumer's error log say what it was).
 *
 *   KAFKA_BROKERS=host:9092 node scripts/replay-dead-letters.mjs --dry-run          # list them
 *   KAFKA_BROKERS=host:9092 node scripts/replay-dead-letters.mjs --event-id <uuid>  # replay one (repeatable)
 *   KAFKA_BROKERS=host:9092 node scripts/replay-dead-letters.mjs --group identity.audit-log  # all of one consumer group
 *   KAFKA_BROKERS=host:9092 node scripts/replay-dead-letters.mjs --all
 * --namespace <prefix> reads and writes prefixed topics (test runs put their topics under one).
 * Nothing is committed: the dead-letter topic keeps every message until its retention ends.
 */
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';

const { values: args } = parseArgs({
  options: {
    'event-id': { type: 'string', multiple: true, default: [] },
    group: { type: 'string' },
    all: { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
    namespace: { type: 'string', default: '' },
  },
});
const brokers = (process.env.KAFKA_BROKERS ?? '')
  .split(',')
  .map((b) => b.trim())
  .filter(Boolean);
if (!brokers.length) fail('set KAFKA_BROKERS (host:port[,host:port…]) to the cluster the services use');
if (!args.all && !args.group && !args['event-id'].length && !args['dry-run']) {
  fail(
    'say what to replay: --event-id <uuid> (repeatable), --group <consumer group> or --all; --dry-run lists the dead letters',
  );
}
const ns = args.namespace;
const DEAD_LETTER = `${ns}workauto.dead-letter.v1`;

const kafka = new Kafka({ clientId: 'workauto-replay', brokers, logLevel: logLevel.NOTHING });
const admin = kafka.admin();
await admin
  .connect()
  .catch((err) => fail(`cannot reach Kafka at ${brokers.join(',')}: ${err.message}; check KAFKA_BROKERS`));
// The end of each partition now: the replay stops there (what it produces itself is not re-read).
const topics = await admin
  .listTopics()
  .catch((err) => fail(`cannot reach Kafka at ${brokers.join(',')}: ${err.message}; check KAFKA_BROKERS`));
if (!topics.includes(DEAD_LETTER)) {
  await admin.disconnect();
  console.error(`no topic ${DEAD_LETTER} on this cluster: nothing was ever dead-lettered (or --namespace is wrong)`);
  process.exit(0);
}
const ends = new Map((await admin.fetchTopicOffsets(DEAD_LETTER)).map((p) => [p.partition, BigInt(p.high)]));
await admin.disconnect();
const pending = new Set([...ends].filter(([, high]) => high > 0n).map(([partition]) => partition));

const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
await producer.connect();
const consumer = kafka.consumer({ groupId: `workauto-replay-${randomUUID()}` });
await consumer.connect();
await consumer.subscribe({ topic: DEAD_LETTER, fromBeginning: true });

const wanted = new Set(args['event-id']);
let seen = 0;
let replayed = 0;
const finished = new Promise((resolve) => {
  if (!pending.size) resolve();
  void consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const offset = BigInt(message.offset);
      if (offset < ends.get(partition)) {
        seen++;
        const headers = Object.fromEntries(
          Object.entries(message.headers ?? {}).map(([k, v]) => [k, v?.toString('utf8') ?? '']),
        );
        const matches =
          args.all ||
          wanted.has(headers['event-id']) ||
          (args.group !== undefined && headers['dead-letter-group'] === args.group);
        const line = {
          offset: message.offset,
          partition,
          event_id: headers['event-id'],
          event_type: headers['event-type'],
          group: headers['dead-letter-group'],
          original_topic: headers['original-topic'],
          reason: headers['dead-letter-reason'],
        };
        if (args['dry-run']) console.log(JSON.stringify(line));
        else if (matches) {
          const rest = Object.fromEntries(
            Object.entries(headers).filter(([k]) => !k.startsWith('dead-letter-') && k !== 'original-topic'),
          );
          await producer.send({
            topic: ns + headers['original-topic'],
            acks: -1,
            messages: [
              { key: message.key, value: message.value, headers: { ...rest, 'replayed-at': new Date().toISOString() } },
            ],
          });
          replayed++;
          console.log(JSON.stringify({ replayed: true, ...line }));
        }
      }
      if (offset + 1n >= ends.get(partition)) {
        pending.delete(partition);
        if (!pending.size) resolve();
      }
    },
  });
});
await finished;
await consumer.disconnect();
await producer.disconnect();
console.error(`${seen} dead letter(s) read, ${replayed} replayed${args['dry-run'] ? ' (dry run)' : ''}`);

function fail(message) {
  console.error(`replay-dead-letters: ${message}`);
  process.exit(2);
}
