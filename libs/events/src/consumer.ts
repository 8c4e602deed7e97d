import type pg from 'pg';
import { context, metrics, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { isDatabaseUnavailable, preparedStatement, withTransaction, type Queryable } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { backoffDelay, systemClock } from '@workauto/retry';
import { decodeEvent, type ConsumedEvent } from './event.js';
import { TOPICS, type EventTransport, type Subscription, type TransportMessage } from './transport.js';

/** Dedup of every consumed batch: the events of the batch this group had not applied before. */
const MARK_PROCESSED = preparedStatement<[string, string[]]>(
  'events_mark_processed',
  'INSERT INTO processed_events (group_id, event_id) SELECT $1, unnest($2::uuid[]) ON CONFLICT DO NOTHING RETURNING event_id',
);

/** How long a transport keeps a message redeliverable when it does not say (Kafka's topic retention default). */
const DEFAULT_REDELIVERY_MS = 7 * 24 * 3_600_000;

/**
 * How a consumer applies events:
 * - handle: one at a time, inside the transaction that also records each event as processed
 *   (processed_events), so a redelivery is skipped;
 * - handleBatch: a batch at once, for a handler whose one statement is itself idempotent on the
 *   event ids (the audit log's insert, keyed by the event id, ON CONFLICT DO NOTHING; also within a
 *   batch). It runs on the pool as that one statement: no transaction and no processed_events row,
 *   which would only record a second time what its key already records (three round trips a batch).
 *   A failing batch is retried one event at a time.
 */
type ConsumerHandler =
  | { handle(tx: pg.PoolClient, event: ConsumedEvent): Promise<void>; handleBatch?: never }
  | { handleBatch(db: Queryable, events: ConsumedEvent[]): Promise<void>; handle?: never };

export type ConsumerOptions = ConsumerCommon & ConsumerHandler;

interface ConsumerCommon {
  transport: EventTransport;
  pool: pg.Pool;
  groupId: string;
  topics: string[];
  logger: Logger;
  /**
   * The ids of a batch's events that handle() would act on, read in one query: the others are
   * skipped without a transaction or a processed_events row (webhooks: events of tenants with no
   * endpoint, most of them). Only for a handler that does nothing for such an event, so that a
   * redelivery of a skipped one is decided again as if it came for the first time.
   */
  relevant?(db: pg.Pool, events: ConsumedEvent[]): Promise<Set<string>>;
  maxAttempts?: number;
  deadLetterTopic?: string;
  retryDelayMs?: number;
  /**
   * How long a processed event id is kept for deduplication. Default: twice the transport's
   * retention (KAFKA_TOPIC_RETENTION_MS), so any redelivery the broker can still make is skipped.
   */
  keepProcessedMs?: number;
}

const tracer = trace.getTracer('@workauto/events');
/**
 * Alert on any increase: each one is an event a consumer did not apply (docs/operations.md says
 * how to replay it). Looked up at each use: the global meter provider may be registered after
 * this module loaded, and a meter taken before that would stay a no-op.
 */
const deadLettered = () =>
  metrics.getMeter('@workauto/events').createCounter('workauto.events.dead_lettered', {
    description: 'Events a consumer group gave up on and moved to the dead-letter topic',
    unit: '{event}',
  });

/**
 * Consumes events exactly once in effect: a batch of events is applied in one transaction that also
 * inserts (group, event id) into processed_events, so a redelivery is skipped (with handleBatch, the
 * handler's one idempotent statement skips it); the transport counts the batch consumed only after
 * it committed. If the batch fails, its events are applied one at a time; an event that fails
 * maxAttempts times goes to the dead-letter topic with the reason (an error log line and the
 * workauto.events.dead_lettered metric), so it never blocks its partition. Each event is handled in
 * a consumer span continuing the trace of the request that made it (the traceparent header). Ids
 * older than keepProcessedMs are pruned from processed_events.
 */
export async function startConsumer(opts: ConsumerOptions): Promise<Subscription> {
  const {
    transport,
    pool,
    groupId,
    logger,
    maxAttempts = 5,
    deadLetterTopic = TOPICS.deadLetter,
    retryDelayMs = 100,
  } = opts;
  const keepProcessedMs = opts.keepProcessedMs ?? 2 * (transport.retentionMs ?? DEFAULT_REDELIVERY_MS);
  const deadLetter = async (message: TransportMessage, reason: string) => {
    await transport.publish([
      {
        ...message,
        topic: deadLetterTopic,
        headers: {
          ...message.headers,
          'dead-letter-reason': reason.slice(0, 1000),
          'dead-letter-group': groupId,
          'original-topic': message.topic,
        },
      },
    ]);
    // Only once it is in the dead-letter topic (a failed publish redelivers the batch: no double count).
    logger.error(
      {
        group: groupId,
        topic: message.topic,
        key: message.key,
        event_id: message.headers['event-id'],
        event_type: message.headers['event-type'],
        reason,
      },
      `event moved to the dead-letter topic ${deadLetterTopic}: it was not applied; fix the cause, then replay it (docs/operations.md, scripts/replay-dead-letters.mjs)`,
    );
    deadLettered().add(1, { group: groupId, topic: message.topic });
  };
  /** Each event in a consumer span, a child of the span that recorded it (its traceparent header), around `work`. */
  const traced = async (items: Decoded[], work: () => Promise<void>) => {
    const parents = items.map(({ message }) => propagation.extract(context.active(), message.headers));
    const spans = items.map(({ message, event }, i) =>
      tracer.startSpan(
        `process ${message.topic}`, // OpenTelemetry messaging conventions: "{operation} {destination}"
        {
          kind: SpanKind.CONSUMER,
          attributes: {
            'messaging.operation.type': 'process',
            'messaging.destination.name': message.topic,
            'messaging.consumer.group.name': groupId,
            'messaging.message.id': event.id,
            'workauto.event.type': event.type,
          },
        },
        parents[i],
      ),
    );
    try {
      // One event: its handler runs in its span's context (the spans it starts are its children).
      await (spans.length === 1 ? context.with(trace.setSpan(parents[0]!, spans[0]!), work) : work());
    } catch (err) {
      for (const span of spans) span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      for (const span of spans) span.end();
    }
  };
  type Decoded = { message: TransportMessage; event: ConsumedEvent };
  /**
   * Applies a batch: handleBatch's as its one idempotent statement; handle's one at a time in a
   * transaction that records them in processed_events, skipping those recorded before.
   */
  const apply = async (items: Decoded[]) => {
    const { handle, handleBatch } = opts;
    if (handleBatch) {
      await traced(items, () =>
        handleBatch(
          pool,
          items.map((d) => d.event),
        ),
      );
      return;
    }
    await withTransaction(pool, async (tx) => {
      const { rows } = await tx.query<{ event_id: string }>(MARK_PROCESSED([groupId, items.map((d) => d.event.id)]));
      const fresh = new Set(rows.map((r) => r.event_id));
      // Not applied before (a redelivery), nor twice in this batch.
      for (const item of items.filter(({ event }) => fresh.delete(event.id)))
        await traced([item], () => handle(tx, item.event));
    });
  };
  /** One event on its own, retried, then dead-lettered: isolates what made a batch fail. */
  const applyOne = async (item: Decoded) => {
    let lastError: unknown;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      try {
        await apply([item]);
        return;
      } catch (err) {
        // The database being away is no fault of the event: give it back, the transport redelivers
        // it later (the dead-letter topic is for events that cannot be applied).
        if (isDatabaseUnavailable(err)) throw err;
        lastError = err;
        if (attempt < maxAttempts) await systemClock.sleep(backoffDelay({ firstMs: retryDelayMs }, attempt));
      }
    }
    await deadLetter(item.message, lastError instanceof Error ? lastError.message : String(lastError));
  };

  const pruneProcessed = async () => {
    try {
      const { rowCount } = await pool.query(
        `DELETE FROM processed_events WHERE group_id = $1 AND processed_at < now() - $2 * interval '1 millisecond'`,
        [groupId, keepProcessedMs],
      );
      if (rowCount)
        logger.info(
          { group: groupId, pruned: rowCount },
          'pruned processed event ids older than the redelivery window',
        );
    } catch (err) {
      logger.warn(
        { group: groupId, err: (err as Error).message },
        'could not prune processed_events; will retry in an hour',
      );
    }
  };
  await pruneProcessed();
  const pruning = setInterval(() => void pruneProcessed(), 3_600_000);
  pruning.unref();

  const subscribing = transport.subscribe({
    groupId,
    topics: opts.topics,
    handle: async (batch) => {
      const decoded: Decoded[] = [];
      for (const message of batch) {
        try {
          decoded.push({ message, event: decodeEvent(message.value) });
        } catch (err) {
          await deadLetter(message, `undecodable: ${(err as Error).message}`);
        }
      }
      const wanted =
        opts.relevant && decoded.length
          ? await opts.relevant(
              pool,
              decoded.map((d) => d.event),
            )
          : undefined;
      const items = wanted ? decoded.filter((d) => wanted.has(d.event.id)) : decoded;
      if (!items.length) return;
      // The common case: the whole batch at once.
      try {
        await apply(items);
        return;
      } catch {
        // Something in the batch fails: one at a time, in order, so the rest is applied and only
        // the failing event goes to the dead-letter topic.
      }
      for (const item of items) await applyOne(item);
    },
  });
  // A subscription that could not start (the broker away at start-up) is retried by the caller: no timer left behind.
  const subscription = await subscribing.catch((err: unknown) => {
    clearInterval(pruning);
    throw err;
  });
  return {
    stop: async () => {
      clearInterval(pruning);
      await subscription.stop();
    },
  };
}
