import { backoffDelay, systemClock } from '@workauto/retry';
import type { EventTransport, Subscription, TransportMessage } from './transport.js';

/**
 * In-process transport for `make dev` without Kafka. publish() resolves only after every current
 * subscriber of the topic has handled the message (retrying a failing handler), so the outbox
 * marks an event published only once it was applied: the same at-least-once guarantee as Kafka
 * with the consumer's dedup, without a broker. A topic nobody subscribes to drops its messages.
 */
export class LocalTransport implements EventTransport {
  private readonly subscribers = new Map<
    string,
    Set<{ groupId: string; handle: (batch: TransportMessage[]) => Promise<void> }>
  >();
  private closed = false;

  constructor(private readonly retryDelayMs = 200) {}

  async publish(messages: TransportMessage[]): Promise<void> {
    if (this.closed) throw new Error('the local event transport is closed');
    // Like Kafka partitions: each key's messages in order as one batch, different keys side by side.
    const byKey = new Map<string, TransportMessage[]>();
    for (const m of messages) byKey.set(`${m.topic}\0${m.key}`, [...(byKey.get(`${m.topic}\0${m.key}`) ?? []), m]);
    await Promise.all([...byKey.values()].map((batch) => this.deliver(batch)));
  }

  /** One key's batch to every subscriber of its topic, retried until the subscriber takes it. */
  private async deliver(batch: TransportMessage[]): Promise<void> {
    for (const sub of this.subscribers.get(batch[0]!.topic) ?? []) {
      for (let retry = 1; ; retry++) {
        try {
          await sub.handle(batch);
          break;
        } catch {
          if (this.closed) throw new Error('the local event transport closed during delivery');
          await systemClock.sleep(backoffDelay({ firstMs: this.retryDelayMs, maxMs: 5_000 }, retry));
        }
      }
    }
  }

  async subscribe(opts: {
    groupId: string;
    topics: string[];
    handle: (batch: TransportMessage[]) => Promise<void>;
  }): Promise<Subscription> {
    const entry = { groupId: opts.groupId, handle: opts.handle };
    for (const topic of opts.topics) {
      if (!this.subscribers.has(topic)) this.subscribers.set(topic, new Set());
      this.subscribers.get(topic)!.add(entry);
    }
    return {
      stop: async () => {
        for (const topic of opts.topics) this.subscribers.get(topic)?.delete(entry);
      },
    };
  }

  async ensureTopics(): Promise<void> {}

  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
  }
}
