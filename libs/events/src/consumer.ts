import type pg from 'pg';
import { withTransaction } from '@workauto/db';
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
 * Consumes events exactly once in effect: each event is applied in a transaction that also inserts
 * (group, event id) into processed_events, so a redelivery is skipped; the transport commits the
 * offset only after that transaction committed. An event that fails maxAttempts times goes to the
 * dead-letter topic with the reason, so it never blocks its partition.
 */
export async function startConsumer(opts: ConsumerOptions): Promise<Subscription> {
  const { transport, pool, groupId, logger, maxAttempts = 5, deadLetterTopic = TOPICS.deadLetter, retryDelayMs = 100 } = opts;
  const deadLetter = async (message: TransportMessage, reason: string) => {
    logger.error({ group: groupId, topic: message.topic, key: message.key, event_id: message.headers['event-id'], reason }, 'event moved to the dead-letter topic');
    await transport.publish([
      { ...message, topic: deadLetterTopic, headers: { ...message.headers, 'dead-letter-reason': reason.slice(0, 1000), 'dead-letter-group': groupId, 'original-topic': message.topic } },
    ]);
  };
  return transport.subscribe({
    groupId,
    topics: opts.topics,
    handle: async (message) => {
      let event: Event;
      try {
        event = Event.decode(message.value);
        if (!event.id) throw new Error('event has no id');
      } catch (err) {
        return deadLetter(message, `undecodable: ${(err as Error).message}`);
      }
      let lastError: unknown;
      for (let attempt = 1; attempt <= maxAttempts; attempt++) {
        try {
          await withTransaction(pool, async (tx) => {
            const fresh = await tx.query('INSERT INTO processed_events (group_id, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [groupId, event.id]);
            if (fresh.rowCount === 0) return; // applied before: a redelivery
            await opts.handle(tx, event);
          });
          return;
        } catch (err) {
          lastError = err;
          if (attempt < maxAttempts) await new Promise((r) => setTimeout(r, retryDelayMs * 2 ** (attempt - 1)));
        }
      }
      await deadLetter(message, (lastError as Error)?.message ?? String(lastError));
    },
  });
}
