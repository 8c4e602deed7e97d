/**
 * Delivery attempts as jobs of @workauto/jobs (queue webhook-deliveries, key = endpoint id, so
 * WEBHOOK_ENDPOINT_CONCURRENCY caps one receiver across replicas): claimed with a lease (FOR
 * UPDATE SKIP LOCKED), sent signed, recorded, and rescheduled per the contract.
 */
import { newId, withTransaction } from '@workauto/db';
import { PermanentFailure, RetryLater, type Job, type JobWorker } from '@workauto/jobs';
import type { Logger } from '@workauto/logger';
import { nextDelay } from '../domain/schedule.js';
import { secretContext, type DeliveryJob, type WebhooksDeps } from '../handlers/common.js';
import * as deliveries from '../repo/deliveries.js';
import * as endpoints from '../repo/endpoints.js';
import * as events from '../repo/events.js';
import * as secrets from '../repo/secrets.js';
import { disableBySystem } from './endpoint-state.js';
import { sendSigned } from './sender.js';

/** An idle worker looks for due deliveries this often (the latency floor of a delivery). */
const POLL_MS = 25;

/** The plaintext secrets that sign now, newest first. */
export async function currentSecrets(deps: Pick<WebhooksDeps, 'pool' | 'keyring'>, tenantId: string, endpointId: string): Promise<string[]> {
  const stored = await secrets.signingSecrets(deps.pool, tenantId, endpointId);
  return stored.map((c) => deps.keyring.decrypt(c, secretContext(tenantId, endpointId)));
}

const days = (ms: number) => (ms % 86_400_000 === 0 ? `${ms / 86_400_000} days` : `${Math.round(ms / 1000)} s`);

export function deliveryWorker(deps: WebhooksDeps, logger: Logger): JobWorker<DeliveryJob> {
  const { pool, settings } = deps;
  return deps.queue.worker(pool, {
    logger,
    concurrency: settings.workerConcurrency,
    maxPerKey: settings.endpointConcurrency,
    leaseMs: settings.leaseMs,
    attemptTimeoutMs: settings.timeoutMs + 10_000,
    pollMs: POLL_MS,
    handle: (job, signal) => attempt(deps, job, signal),
  });
}

async function attempt(deps: WebhooksDeps, job: Job<DeliveryJob>, signal: AbortSignal): Promise<void> {
  const { pool, settings } = deps;
  const work = await deliveries.findWork(pool, job.payload.delivery_id);
  // Settled meanwhile (endpoint disabled, a retry made a newer job): nothing to do.
  if (!work || work.status !== 'pending' || work.job_id !== job.id) return;
  if (!work.endpoint_live) {
    await withTransaction(pool, async (tx) => {
      if (await deliveries.failWithoutAttempt(tx, work.id, job.id)) await events.refreshStatus(tx, [work.event_id]);
    });
    return;
  }
  const attemptedAt = new Date();
  const result = await sendSigned(deps.egress, {
    url: work.url, webhookId: work.event_id, body: work.payload, timeoutMs: settings.timeoutMs, signal,
    secrets: await currentSecrets(deps, work.tenant_id, work.endpoint_id),
  });
  const delay = result.success || result.gone ? undefined : nextDelay(settings.retrySchedule, job.attempt, result.retryAfterMs);
  const status = result.success ? 'succeeded' : delay === undefined ? 'failed' : 'pending';
  await withTransaction(pool, async (tx) => {
    if (!(await deliveries.afterAttempt(tx, work.id, job.id, { status, nextAttemptInMs: status === 'pending' ? delay! : null }))) return;
    await deliveries.insertAttempt(tx, {
      id: newId(), tenant_id: work.tenant_id, delivery_id: work.id, attempted_at: attemptedAt, trigger: work.trigger,
      http_status: result.httpStatus ?? null, response_time_ms: result.responseTimeMs, error_message: result.error ?? null,
    });
    const endpoint = await endpoints.recordOutcome(tx, work.tenant_id, work.endpoint_id, result.success);
    if (result.gone) {
      await disableBySystem(tx, work.tenant_id, work.endpoint_id, 'the receiver answered 410 Gone; enable the endpoint again (PATCH is_enabled true) once it accepts deliveries');
    } else if (!result.success && endpoint?.is_enabled && endpoint.failing_since
      && endpoint.failing_since.getTime() <= Date.now() - settings.disableAfterMs
      && (status === 'failed' || (await deliveries.hasFailedSince(tx, work.endpoint_id, endpoint.failing_since)))) {
      await disableBySystem(tx, work.tenant_id, work.endpoint_id,
        `no successful delivery for ${days(settings.disableAfterMs)}; fix the receiver, then enable the endpoint again (PATCH is_enabled true) and retry failed events`);
    }
    await events.refreshStatus(tx, [work.event_id]);
  });
  if (status === 'pending') throw new RetryLater(delay!, result.error);
  if (status === 'failed') throw new PermanentFailure(result.error ?? 'failed');
}
