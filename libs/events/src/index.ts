import type { Logger } from '@workauto/logger';
import { KafkaTransport } from './kafka-transport.js';
import { kafkaClientSecurity, type KafkaSecurityConfig } from './kafka-security.js';
import { LocalTransport } from './local-transport.js';
import type { EventTransport } from './transport.js';

export { EVENT_TYPES, type EventType } from './event-types/index.js';
export { recordEvent, eventChannels, OUTBOX_MIGRATIONS, type EventInput, type EventContext } from './outbox.js';
export { decodeEvent, DATA_SCHEMA, type ConsumedEvent } from './event.js';
export { OutboxRelay, type RelayOptions } from './relay.js';
export { startConsumer, type ConsumerOptions } from './consumer.js';
export {
  KafkaTransport,
  TopicsMissingError,
  isRetriableKafkaError,
  type KafkaTransportOptions,
} from './kafka-transport.js';
export { kafkaClientSecurity, type KafkaClientSecurity, type KafkaSecurityConfig } from './kafka-security.js';
export { LocalTransport } from './local-transport.js';
export { TOPICS, type EventTransport, type TransportMessage, type Subscription } from './transport.js';

/** Kafka when brokers are given (KAFKA_BROKERS), else the in-process transport. */
export function createTransport(opts: {
  brokers?: string | undefined;
  clientId: string;
  logger: Logger;
  partitions?: number;
  replicationFactor?: number;
  retentionMs?: number;
  namespace?: string;
  security?: KafkaSecurityConfig;
  createTopics?: boolean;
}): EventTransport {
  if (!opts.brokers) return new LocalTransport();
  return new KafkaTransport({
    brokers: opts.brokers
      .split(',')
      .map((b) => b.trim())
      .filter(Boolean),
    clientId: opts.clientId,
    logger: opts.logger,
    ...(opts.partitions ? { partitions: opts.partitions } : {}),
    ...(opts.replicationFactor ? { replicationFactor: opts.replicationFactor } : {}),
    ...(opts.retentionMs ? { retentionMs: opts.retentionMs } : {}),
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
    ...(opts.security ? { security: kafkaClientSecurity(opts.security) } : {}),
    ...(opts.createTopics === false ? { createTopics: false } : {}),
  });
}
