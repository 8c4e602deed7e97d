import { metrics } from '@opentelemetry/api';
import { Kafka, logLevel, type Admin, type Batch, type Consumer, type EachBatchPayload, type Producer } from 'kafkajs';
import type { Logger } from '@workauto/logger';
import { retry } from '@workauto/retry';
import type { KafkaClientSecurity } from './kafka-security.js';
import { stopIdleRequestQueueTimers } from './kafkajs-idle-timer.js';
import type { EventTransport, Subscription, TransportMessage } from './transport.js';

/**
 * Messages of a partition not yet applied by a consumer group, as of its last batch: alert when it
 * grows. Looked up at each use: the meter provider is registered when telemetry starts.
 */
const consumerLag = () =>
  metrics.getMeter('@workauto/events').createGauge('workauto.events.consumer_lag', {
    description: 'Messages behind the partition end, per consumer group',
    unit: '{message}',
  });

/** How long a consumer that stopped for good waits before a new one is started in its place. */
const RESTART_DELAY_MS = 5_000;

/** Messages handed to a consumer at once (one database transaction applies them). */
const BATCH_CHUNK = 100;
/** A consumer's resolved offsets are committed this often (and every 100 messages, and at stop). */
const COMMIT_INTERVAL_MS = 1_000;

export interface KafkaTransportOptions {
  brokers: string[];
  clientId: string;
  logger: Logger;
  /** Partitions of topics this transport creates (default 3). */
  partitions?: number;
  replicationFactor?: number;
  /** Retention of created topics in ms (default 7 days). */
  retentionMs?: number;
  /** Prefix of every topic and consumer group, so several installations (or test runs) share a broker apart. */
  namespace?: string;
  /** TLS and SASL (kafkaClientSecurity). */
  security?: KafkaClientSecurity;
  /** false: topics are an operator's (Strimzi KafkaTopic…): they are only checked to exist, never created. */
  createTopics?: boolean;
}

/**
 * kafkajs behind the transport interface: an idempotent producer (acks from all in-sync replicas,
 * one request in flight so retries cannot reorder), consumers that commit an offset only after
 * the handler resolved (kafkajs auto-commit of resolved offsets).
 */
export class KafkaTransport implements EventTransport {
  private readonly kafka: Kafka;
  private producer: Producer | undefined;
  private producerReady: Promise<Producer> | undefined;
  private readonly consumers = new Set<Consumer>();
  /** Topics known to exist (created or seen by this transport). */
  private readonly ensured = new Set<string>();

  private readonly ns: string;
  /** The retention of the topics this transport creates: consumers keep dedup ids longer (consumer.ts). */
  readonly retentionMs: number;
  readonly where: string;

  constructor(private readonly opts: KafkaTransportOptions) {
    stopIdleRequestQueueTimers();
    this.ns = opts.namespace ?? '';
    this.retentionMs = opts.retentionMs ?? 7 * 24 * 3_600_000;
    this.where = `KAFKA_BROKERS=${opts.brokers.join(',')}`;
    const log = opts.logger;
    this.kafka = new Kafka({
      clientId: opts.clientId,
      brokers: opts.brokers,
      ...opts.security,
      connectionTimeout: 3_000,
      requestTimeout: 10_000,
      // Fail a publish within seconds when the broker is gone: the outbox keeps the events and
      // the relay retries with its own backoff.
      retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2_000 },
      logLevel: logLevel.NOTHING,
      logCreator:
        () =>
        ({ level, log: entry }) => {
          // The broker's error too ("Response Metadata(…)" alone does not say which): kafkajs puts it in `error`.
          if (level <= logLevel.WARN)
            log.warn({ kafka: entry.message, namespace: entry.namespace, error: entry.error }, 'kafka client');
        },
    });
  }

  private getProducer(): Promise<Producer> {
    if (!this.producerReady) {
      const producer = this.kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
      this.producerReady = producer.connect().then(
        () => (this.producer = producer),
        (err: unknown) => {
          this.producerReady = undefined;
          throw err;
        },
      );
    }
    return this.producerReady;
  }

  async publish(messages: TransportMessage[]): Promise<void> {
    if (!messages.length) return;
    // Topics are created before the first publish to them (auto-creation is off: partitions and retention are ours).
    await this.ensureTopics([...new Set(messages.map((m) => m.topic))]);
    const producer = await this.getProducer();
    const byTopic = new Map<string, TransportMessage[]>();
    for (const m of messages) byTopic.set(m.topic, [...(byTopic.get(m.topic) ?? []), m]);
    try {
      await producer.sendBatch({
        acks: -1,
        topicMessages: [...byTopic].map(([topic, ms]) => ({
          topic: this.ns + topic,
          messages: ms.map((m) => ({ key: m.key, value: m.value, headers: m.headers })),
        })),
      });
    } catch (err) {
      // A broken connection can leave the producer unusable: start a fresh one next time.
      this.producerReady = undefined;
      await producer.disconnect().catch(() => undefined);
      throw err;
    }
  }

  async subscribe(opts: {
    groupId: string;
    topics: string[];
    handle: (batch: TransportMessage[]) => Promise<void>;
  }): Promise<Subscription> {
    // A consumer may start before any producer: its topics must exist before it subscribes.
    await this.ensureTopics(opts.topics);
    const log = this.opts.logger;
    let stopped = false;
    /** Commits what the current consumer resolved and has not committed yet (none before its first batch). */
    let commitResolved: (() => Promise<void>) | undefined;
    /** Batches being handled now, and who waits for the last of them to end (stop). */
    let handling = 0;
    let handled: (() => void) | undefined;
    /** A consumer of the group, connected and subscribed; its group join and its fetches run in the background. */
    const open = async (): Promise<Consumer> => {
      commitResolved = undefined;
      const consumer = this.kafka.consumer({
        groupId: this.ns + opts.groupId,
        allowAutoTopicCreation: false,
        // Never restarted once the subscription stopped: a crash of a join still in flight when the
        // service stopped would otherwise bring the consumer back, and keep the process alive.
        retry: { retries: 10, initialRetryTime: 300, maxRetryTime: 5_000, restartOnFailure: async () => !stopped },
      });
      await consumer.connect();
      try {
        for (const topic of opts.topics) await subscribeWhenLed(consumer, this.ns + topic);
      } catch (err) {
        await consumer.disconnect().catch(() => undefined);
        throw err;
      }
      // Joining the group can take seconds (a new group waits group.initial.rebalance.delay.ms; a
      // member that died without leaving holds the group until its session times out): the service
      // serves meanwhile, and the join is logged when it happens. Connecting and subscribing above
      // have already refused bad credentials, ACLs or topics.
      const joining = performance.now();
      let joined = false;
      consumer.on(consumer.events.GROUP_JOIN, () => {
        if (joined) return;
        joined = true;
        log.info(
          { group: opts.groupId, waited_ms: Math.round(performance.now() - joining) },
          'event consumer joined its group; consuming',
        );
      });
      // kafkajs restarts a consumer that crashed on a retriable error itself; after any other one
      // it leaves it stopped, and the group's events would wait for a restart of the process.
      consumer.on(consumer.events.CRASH, ({ payload }) => {
        log[payload.restart ? 'warn' : 'error'](
          { group: opts.groupId, err: String(payload.error).slice(0, 300), restarts: payload.restart },
          payload.restart
            ? 'event consumer crashed; kafkajs restarts it'
            : 'event consumer crashed; starting a new one',
        );
        if (!payload.restart && !stopped) reopen(consumer);
      });
      consumer
        .run({
          // Offsets are resolved by hand, chunk by chunk, only after the handler (and its database
          // transaction) succeeded, and committed once a second or every 100 messages, and at stop.
          // Not kafkajs's autoCommit: it also commits after every partition's batch whatever the
          // interval, more OffsetCommit requests to the broker than fetches (docs/events.md). A crash,
          // or a rebalance that moves a partition (a replica joining or leaving), redelivers at most
          // that much, which the consumers' dedup absorbs.
          // Partitions are consumed side by side; order holds within each (per key).
          autoCommit: false,
          autoCommitInterval: COMMIT_INTERVAL_MS,
          autoCommitThreshold: 100,
          eachBatchAutoResolve: false,
          partitionsConsumedConcurrently: this.opts.partitions ?? 3,
          eachBatch: async ({
            batch,
            resolveOffset,
            heartbeat,
            isRunning,
            isStale,
            commitOffsetsIfNecessary,
            uncommittedOffsets,
          }) => {
            if (stopped) return;
            commitResolved = () => commitOffsetsIfNecessary(uncommittedOffsets());
            handling++;
            try {
              await this.handleBatch(
                batch,
                opts,
                { resolveOffset, heartbeat, commitOffsetsIfNecessary },
                () => stopped || !isRunning() || isStale(),
              );
            } finally {
              if (--handling === 0) handled?.();
            }
          },
        })
        .catch((err: unknown) => {
          log.error(
            { group: opts.groupId, err: String(err).slice(0, 300) },
            'event consumer could not start; starting a new one',
          );
          reopen(consumer);
        });
      this.consumers.add(consumer);
      return consumer;
    };
    /** Replaces a consumer that stopped for good, every 5 s until a new one is subscribed. */
    const reopen = (dead: Consumer) => {
      this.consumers.delete(dead);
      if (current !== dead || stopped) return;
      const timer = setTimeout(() => {
        if (stopped) return;
        open().then(
          (fresh) => (current = fresh),
          (err: unknown) => {
            log.warn(
              { group: opts.groupId, err: String(err).slice(0, 300) },
              'event consumer not restarted yet; trying again',
            );
            reopen(dead);
          },
        );
      }, RESTART_DELAY_MS);
      timer.unref();
    };
    let current = await open();
    // Resolved offsets of a quiet group are committed within a second too, not at its next batch:
    // its lag, as the broker sees it, stays current. Nothing to commit sends nothing.
    const committer = setInterval(() => void commitResolved?.().catch(() => undefined), COMMIT_INTERVAL_MS);
    committer.unref();
    return {
      stop: async () => {
        stopped = true;
        clearInterval(committer);
        this.consumers.delete(current);
        // The batches in flight end at their next chunk; what they resolved is committed while this
        // member is still in the group (kafkajs's stop leaves it first).
        if (handling > 0) await new Promise<void>((resolve) => (handled = resolve));
        await commitResolved?.().catch((err: unknown) =>
          log.warn(
            { group: opts.groupId, err: String(err).slice(0, 300) },
            'event consumer could not commit its last offsets at stop; the next member redelivers them (skipped as duplicates)',
          ),
        );
        await current.disconnect();
      },
    };
  }

  /** A fetched batch, chunk by chunk: each handled, its last offset resolved, the commit made if due. */
  private async handleBatch(
    batch: Batch,
    opts: { groupId: string; handle: (batch: TransportMessage[]) => Promise<void> },
    kafka: Pick<EachBatchPayload, 'resolveOffset' | 'heartbeat' | 'commitOffsetsIfNecessary'>,
    stopping: () => boolean,
  ): Promise<void> {
    const topic = batch.topic.slice(this.ns.length);
    for (let i = 0; i < batch.messages.length; i += BATCH_CHUNK) {
      if (stopping()) return;
      const chunk = batch.messages.slice(i, i + BATCH_CHUNK);
      await opts.handle(
        chunk.map((message) => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(message.headers ?? {}))
            if (v !== undefined) headers[k] = Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
          return {
            topic,
            key: message.key?.toString('utf8') ?? '',
            value: message.value ?? Buffer.alloc(0),
            headers,
          };
        }),
      );
      const last = chunk[chunk.length - 1]!.offset;
      kafka.resolveOffset(last);
      consumerLag().record(Math.max(0, Number(batch.highWatermark) - Number(last) - 1), {
        group: opts.groupId,
        topic,
        partition: batch.partition,
      });
      await kafka.commitOffsetsIfNecessary();
      await kafka.heartbeat();
    }
  }

  async ensureTopics(topics: string[]): Promise<void> {
    const wanted = topics.filter((t) => !this.ensured.has(t));
    if (!wanted.length) return;
    const admin: Admin = this.kafka.admin();
    await admin.connect();
    try {
      const existing = new Set(await admin.listTopics());
      const missing = wanted.map((t) => this.ns + t).filter((t) => !existing.has(t));
      if (missing.length && this.opts.createTopics === false) throw new TopicsMissingError(missing);
      if (missing.length) {
        // Kafka 4 may answer the leader wait's metadata request about a topic it created a moment
        // ago with "This server does not host this topic-partition" (kafkajs retries only "leader not
        // available"): the topic exists, its leader comes; asking again returns once it has one.
        await whileRetriable(() =>
          admin.createTopics({
            waitForLeaders: true,
            topics: missing.map((topic) => ({
              topic,
              numPartitions: this.opts.partitions ?? 3,
              replicationFactor: this.opts.replicationFactor ?? 1,
              configEntries: [{ name: 'retention.ms', value: String(this.retentionMs) }],
            })),
          }),
        );
      }
      for (const t of wanted) this.ensured.add(t);
    } finally {
      await admin.disconnect();
    }
  }

  async close(): Promise<void> {
    for (const c of this.consumers) await c.disconnect().catch(() => undefined);
    this.consumers.clear();
    if (this.producer) await this.producer.disconnect().catch(() => undefined);
    this.producerReady = undefined;
  }
}

/**
 * consumer.subscribe, retried while the broker answers with a retriable error: a topic another
 * process created a moment ago can exist before its partitions have a leader ("This server does not
 * host this topic-partition"), and kafkajs does not retry that here — without this, one of several
 * services starting at once could exit.
 */
function subscribeWhenLed(consumer: Consumer, topic: string): Promise<void> {
  return whileRetriable(() => consumer.subscribe({ topic, fromBeginning: true }));
}

/** `fn` again while it fails with a retriable Kafka error: 10 tries, 0.3 s doubling to 3 s between them. */
function whileRetriable<T>(fn: () => Promise<T>): Promise<T> {
  return retry(fn, { backoff: { firstMs: 300, maxMs: 3_000 }, attempts: 10, retryable: isRetriableKafkaError });
}

/**
 * Topics an operator must create (KAFKA_CREATE_TOPICS=false) are not there yet: worth waiting for,
 * as the operator may be creating them right now.
 */
export class TopicsMissingError extends Error {
  override name = 'TopicsMissingError';
  readonly retriable = true;
  constructor(readonly topics: string[]) {
    super(
      `Kafka topics ${topics.join(', ')} do not exist; with KAFKA_CREATE_TOPICS=false they must be created by you or your operator (docs/operations.md lists them)`,
    );
  }
}

/**
 * What the broker answers when waiting cannot help: credentials, ACLs, a request this cluster's
 * settings or version refuse. Every other Kafka failure may pass by itself.
 */
const REFUSAL_TYPES =
  /AUTHORIZATION_FAILED|SASL|^INVALID_(REPLICATION_FACTOR|PARTITIONS|CONFIG|REPLICA_ASSIGNMENT|TOPIC_EXCEPTION|REQUEST)$|^POLICY_VIOLATION$|^UNSUPPORTED_|^SECURITY_DISABLED$|^TOPIC_DELETION_DISABLED$/;
const REFUSAL_NAMES = new Set([
  'KafkaJSSASLAuthenticationError',
  'KafkaJSServerDoesNotSupportApiKey',
  'KafkaJSNotImplemented',
  'KafkaJSInvariantViolation',
]);
/** A TLS handshake the client refused: a certificate no configured CA signed, or for another name. */
const TLS_REFUSAL = /certificate|self[- ]signed|unable to verify|altnames/i;

/**
 * A Kafka failure a start waits out, up to its deadline: any error of the Kafka client (kafkajs
 * marks some final that pass with time: its own retries or waits running out, BROKER_NOT_AVAILABLE,
 * an unknown server error or a rebalance while a broker recovers from a pause; they also come
 * wrapped in KafkaJSNumberOfRetriesExceeded), and TopicsMissingError. Refusals are not (a wrong
 * SASL password, a missing ACL, a replication factor above the brokers, an untrusted certificate):
 * the start fails at once, naming them. Nor is an error that is not Kafka's (a bug).
 */
export function isRetriableKafkaError(err: unknown): boolean {
  let kafka = false;
  for (
    let e = err as
        | {
            retriable?: boolean;
            name?: string;
            type?: string;
            originalError?: unknown;
            cause?: unknown;
            message?: string;
          }
        | undefined,
      depth = 0;
    e && depth < 5;
    depth++
  ) {
    if (REFUSAL_NAMES.has(e.name ?? '') || REFUSAL_TYPES.test(e.type ?? '') || TLS_REFUSAL.test(e.message ?? ''))
      return false;
    if (e.name?.startsWith('KafkaJS') || e.retriable) kafka = true;
    e = (e.originalError ?? e.cause) as typeof e;
  }
  return kafka;
}
