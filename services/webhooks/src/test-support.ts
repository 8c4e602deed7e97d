import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { newId } from '@workauto/db';
import { EgressPolicy } from '@workauto/egress';
import { eventChannels, LocalTransport, TOPICS, type EventTransport } from '@workauto/events';
import { createLogger } from '@workauto/logger';
import { Event } from '@workauto/protos/workauto/events/v1/event.js';
import { WebhooksServiceService as S } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { failure, testCallerKeys, testDatabase, TestClient } from '@workauto/testing';
import { createWebhooksService, type RunningService } from './app.js';
import type { WebhookSettings } from './settings.js';

export { S, failure };

export interface StartOptions {
  settings?: Partial<WebhookSettings>;
  egress?: EgressPolicy;
  databaseUrl?: string;
  transport?: EventTransport;
  /** ENCRYPTION_KEYS shared with another replica of the same database (default: a fresh keyring). */
  encryptionKeys?: string;
  /** The service's log level (default silent; `debug` to check what it logs). */
  logLevel?: string;
}

/**
 * webhooks on a fresh database, called over real gRPC; domain events reach it through an
 * in-process transport (publish() resolves once its intake applied them).
 */
export async function startWebhooks(opts: StartOptions = {}) {
  const databaseUrl = opts.databaseUrl ?? (await testDatabase('webhooks'));
  const transport = opts.transport ?? new LocalTransport();
  const service: RunningService = await createWebhooksService(
    {
      databaseUrl,
      host: '127.0.0.1',
      port: 0,
      callerVerifyKeys: testCallerKeys.verifyKeys,
      transport,
      encryptionKeys: opts.encryptionKeys ?? Keyring.generateSpec(),
      settings: { retrySchedule: [0, 500, 1000], timeoutMs: 2_000, ...opts.settings },
      egress: opts.egress ?? new EgressPolicy({ allowPrivate: true }),
    },
    createLogger('webhooks', opts.logLevel ?? 'silent'),
  );
  const client = new TestClient('webhooks', `127.0.0.1:${service.port}`, {
    volumeThreshold: 100_000,
    deadlineMs: 30_000,
  });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  return {
    databaseUrl,
    client,
    db,
    transport,
    /** A domain event as a service's outbox relay publishes it; returns its id. */
    async publish(e: {
      tenantId: string;
      type: string;
      resourceId?: string;
      data?: Record<string, unknown>;
      parent?: { type: string; id: string };
    }): Promise<string> {
      const id = newId();
      const resourceType = e.type.split('.')[0]!;
      const resourceId = e.resourceId ?? newId();
      const value = Buffer.from(
        Event.encode(
          Event.fromPartial({
            id,
            type: e.type,
            tenant_id: e.tenantId,
            occurred_at: new Date(),
            actor: { type: 'member', id: 'm' },
            resource: { type: resourceType, id: resourceId },
            data_json: JSON.stringify(e.data ?? { id: resourceId }),
            metadata_json: '{}',
            data_schema: 'v1',
            source: 'test',
            channels: eventChannels({ resourceType, parent: e.parent }),
          }),
        ).finish(),
      );
      await transport.publish([
        {
          topic: TOPICS.domain,
          key: `${resourceType}:${resourceId}`,
          value,
          headers: { 'event-id': id, 'event-type': e.type, 'tenant-id': e.tenantId },
        },
      ]);
      return id;
    },
    async stop() {
      client.close();
      await db.end();
      await service.stop();
    },
  };
}

export { newTenant as tenant } from '@workauto/testing';
