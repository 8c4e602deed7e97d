import type pg from 'pg';
import { isDatabaseUnavailable, withTransaction } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import { Event } from '@workauto/protos/workauto/events/v1/event.js';
import { TOPICS, type EventTransport, type Subscription, type TransportMessage } from './transport.js';

export interface ConsumerOptions {
  transport: EventTransport;
  pool: pg.Pool;
  groupId: string;
  topics: string[];
  logger: Logger;
  /** Applies one event inside the transaction that also records it as processed. */
  handle(tx: pg.PoolClient, event: Event): Promise<void>;
  maxAttempts?: number;
  deadLetterTopic?: string;
  retryDelayMs?: number;
}

/**
 * Consumes events exactly once in effect: a batch of events is applied in one transaction that also
 * inserts (group, event id) into processed_events, so a redelivery is skipped; the transport counts
 * the batch consumed only after that transaction committed. If the batch fails, its events are
 * applied one at a time; an event that fails maxAttempts times goes to the dead-letter topic with
 * the reason, so it never blocks its partition.
 */
export async function startConsumer(opts: ConsumerOptions): Promise<Subscription> {
  const { transport, pool, groupId, logger, maxAttempts = 5, deadLetterTopic = TOPICS.deadLetter, retryDelayMs = 100 } = opts;
  const deadLetter = async (message: TransportMessage, reason: string) => {
    logger.error({ group: groupId, topic: message.topic, key: message.key, event_id: message.headers['event-id'], reason }, 'event moved to the dead-letter topic');
    await transport.publish([
      { ...message, topic: deadLetterTopic, headers: { ...message.headers, 'dead-letter-reason': reason.slice(0, 1000), 'dead-letter-group': groupId, 'original-topic': message.topic } },
    ]);
  };
  /** Applies the events not applied before (by this group) in the transaction tx. */
  const applyFresh = async (tx: pg.PoolClient, events: Event[]) => {
    const { rows } = await tx.query<{ event_id: string }>(
      'INSERT INTO processed_events (group_id, event_id) SELECT $1, unnest($2::uuid[]) ON CONFLICT DO NOTHING RETURNING event_id',
      [groupId, events.map((e) => e.id)],
    );
    const fresh = new Set(rows.map((r) => r.event_id));
    for (const event of events) {
      if (!fresh.delete(event.id)) continue; // applied before (a redelivery), or twice in this batch
      await opts.handle(tx, event);
    }
  };
  /** One event on its own, retried, then dead-lettered: isolates what made a batch fail. */
  const applyOne = async (message: TransportMessage, event: Event) => {
    let lastError: unknown;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      try {
        await withTransaction(pool, (tx) => applyFresh(tx, [event]));
        return;
      } catch (err) {
        // The database being away is no fault of the event: give it back, the transport redelivers
        // it later (the dead-letter topic is for events that cannot be applied).
        if (isDatabaseUnavailable(err)) throw err;
        lastError = err;
        if (attempt < maxAttempts) await new Promise((r) => setTimeout(r, retryDelayMs * 2 ** (attempt - 1)));
      }
    }
    await deadLetter(message, (lastError as Error)?.message ?? String(lastError));
  };
  return transport.subscribe({
    groupId,
    topics: opts.topics,
    handle: async (batch) => {
      const decoded: { message: TransportMessage; event: Event }[] = [];
      for (const message of batch) {
        try {
          const event = Event.decode(message.value);
          if (!event.id) throw new Error('event has no id');
          decoded.push({ message, event });
        } catch (err) {
          await deadLetter(message, `undecodable: ${(err as Error).message}`);
        }
      }
      if (!decoded.length) return;
      // The common case: the whole batch in one transaction.
      try {
        await withTransaction(pool, (tx) => applyFresh(tx, decoded.map((d) => d.event)));
        return;
      } catch {
        // Something in the batch fails: one at a time, in order, so the rest is applied and only
        // the failing event goes to the dead-letter topic.
      }
      for (const { message, event } of decoded) await applyOne(message, event);
    },
  });
}
