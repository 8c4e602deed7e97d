import { fileURLToPath } from 'node:url';
import { Keyring } from '@workauto/crypto';
import type { Pool } from '@workauto/db';
import { EgressPolicy } from '@workauto/egress';
import { startConsumer, TOPICS } from '@workauto/events';
import { JOBS_MIGRATIONS, JobQueue, PeriodicWorker } from '@workauto/jobs';
import { createLogger, type Logger } from '@workauto/logger';
import { WebhooksServiceService } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { INTAKE_GROUP, takeIn, worthTakingIn } from './delivery/intake.js';
import { deliveryWorker } from './delivery/worker.js';
import { DELIVERY_QUEUE, type DeliveryJob, type WebhooksDeps } from './handlers/common.js';
import { webhooksHandlers } from './handlers/index.js';
import * as events from './repo/events.js';
import { defaultSettings, type WebhookSettings } from './settings.js';

export interface WebhooksConfig extends ServiceConfig {
  /** ENCRYPTION_KEYS: the keyring that encrypts signing secrets. */
  encryptionKeys: string;
  /** WEBHOOK_* settings; unset fields take their defaults. */
  settings?: Partial<WebhookSettings>;
  /** The egress policy (EGRESS_ALLOW_PRIVATE, EGRESS_ALLOWED_CIDRS); default: private addresses refused. The service closes it on stop. */
  egress?: EgressPolicy;
}
export type { RunningService };

/**
 * Deletes events older than the retention, hourly on one replica at a time (and when a replica
 * starts): batch after batch until none is left, so a backlog larger than one batch does not
 * outgrow the sweep.
 */
function retentionWorker(pool: Pool, days: number, logger: Logger): PeriodicWorker {
  return new PeriodicWorker({
    name: 'webhooks:retention',
    replicas: 'one',
    pool,
    everyMs: 3_600_000,
    logger,
    tick: async ({ signal, beat }) => {
      let deleted = 0;
      let batch: number;
      do {
        beat();
        batch = await events.deleteOlderThan(pool, days);
        deleted += batch;
      } while (batch === events.RETENTION_BATCH && !signal.aborted);
      if (deleted) logger.info({ deleted, days }, 'deleted webhook events past their retention');
    },
  });
}

/**
 * webhooks with the shared start-up (@workauto/service): the API, the intake consumer of the
 * domain-events topic, the delivery workers and the retention sweep.
 */
export async function createWebhooksService(
  config: WebhooksConfig,
  logger: Logger = createLogger('webhooks'),
): Promise<RunningService> {
  const keyring = Keyring.fromEnv(config.encryptionKeys);
  const settings: WebhookSettings = { ...defaultSettings(), ...config.settings };
  const egress = config.egress ?? new EgressPolicy();
  const queue = new JobQueue<DeliveryJob>(DELIVERY_QUEUE);
  const depsOf = (pool: Pool): WebhooksDeps => ({ pool, keyring, egress, settings, queue });
  let running: RunningService;
  try {
    running = await startService(
      {
        name: 'webhooks',
        errorDomain: 'webhooks.workauto',
        protoFile: 'workauto/webhooks/v1/webhooks.proto',
        grpcService: 'workauto.webhooks.v1.WebhooksService',
        definition: WebhooksServiceService,
        migrations: [JOBS_MIGRATIONS, fileURLToPath(new URL('../migrations', import.meta.url))],
        handlers: (pool) => webhooksHandlers(depsOf(pool)),
        consumers: async (pool, transport) => [
          await startConsumer({
            transport,
            pool,
            logger,
            groupId: INTAKE_GROUP,
            topics: [TOPICS.domain],
            handle: (tx, event) => takeIn(depsOf(pool), tx, event),
            relevant: worthTakingIn,
          }),
        ],
        workers: ({ pool }) => [
          ...(settings.workerConcurrency > 0 ? [deliveryWorker(depsOf(pool), logger)] : []),
          retentionWorker(pool, settings.retentionDays, logger),
        ],
      },
      config,
      logger,
    );
  } catch (err) {
    await egress.close();
    throw err;
  }
  return {
    port: running.port,
    async stop() {
      await running.stop();
      await egress.close();
    },
  };
}
