/** The small interface services use for event streams, so the Kafka client can be swapped. */
export interface TransportMessage {
  topic: string;
  /** Messages of one key keep their order (Kafka: same partition). */
  key: string;
  value: Buffer;
  headers: Record<string, string>;
}

export interface Subscription {
  stop(): Promise<void>;
}

export interface EventTransport {
  /** How long a published message stays redeliverable (Kafka: the topics' retention); undefined when unknown. */
  readonly retentionMs?: number | undefined;
  /** Where the streams live, for log lines (Kafka: `KAFKA_BROKERS=host:port,…`; never credentials). */
  readonly where?: string | undefined;
  /** Resolves only when every message is durably accepted (Kafka: acknowledged by all in-sync replicas). */
  publish(messages: TransportMessage[]): Promise<void>;
  /**
   * At-least-once delivery to `handle`, in batches that keep the order of each key (Kafka: a run of
   * one partition's messages): a batch counts as consumed only after `handle` resolved; if it
   * rejects, the batch is delivered again.
   */
  subscribe(opts: {
    groupId: string;
    topics: string[];
    handle: (batch: TransportMessage[]) => Promise<void>;
  }): Promise<Subscription>;
  /** Creates the topics when they do not exist (a no-op where topics need no creation). */
  ensureTopics(topics: string[]): Promise<void>;
  close(): Promise<void>;
}

/** Topic names; one place, overridable by configuration. */
export const TOPICS = {
  audit: 'workauto.audit.v1',
  domain: 'workauto.domain-events.v1',
  deadLetter: 'workauto.dead-letter.v1',
} as const;
