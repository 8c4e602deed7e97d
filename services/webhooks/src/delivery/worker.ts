/**
 * Delivery attempts as jobs of @workauto/jobs (queue webhook-deliveries, key = endpoint id, so
 * WEBHOOK_ENDPOINT_CONCURRENCY caps one receiver across replicas): claimed with a lease (FOR
 * UPDATE SKIP LOCKED), sent signed, recorded, and rescheduled (docs/webhooks.md "How it works").
 */
import { newId, withTransaction } from '@workauto/db';
import { PermanentFailure, RetryLater, SUCCESS_RECORDED, type Job, type JobWorker } from '@workauto/jobs';
import type { Logger } from '@workauto/logger';
import { nextDelay } from '../domain/schedule.js';
import { secretContext, type DeliveryJob, type WebhooksDeps } from '../handlers/common.js';
import * as deliveries from '../repo/deliveries.js';
import { disableBySystem } from './endpoint-state.js';
import { sendSigned } from './sender.js';

/**
 * New deliveries wake the workers at once (listen: NOTIFY on enqueue, and a claim whenever an
 * attempt ends); the poll only finds retries that became due, at most this late.
 */
const POLL_MS = 200;

const days = (ms: number) => (ms % 86_400_000 === 0 ? `${ms / 86_400_000} days` : `${Math.round(ms / 1000)} s`);

export function deliveryWorker(deps: WebhooksDeps, logger: Logger): JobWorker<DeliveryJob> {
  const { pool, settings } = deps;
  const worker: JobWorker<DeliveryJob> = deps.queue.worker(pool, {
    logger,
    concurrency: settings.workerConcurrency,
    maxPerKey: settings.endpointConcurrency,
    maxPerGroup: settings.tenantConcurrency,
    leaseMs: settings.leaseMs,
    attemptTimeoutMs: settings.timeoutMs + 10_000,
    pollMs: POLL_MS,
    listen: true,
    handle: (job, signal) => attempt(deps, worker, job, signal),
    // Attempts ran out outside the schedule (replicas died mid-attempt): the delivery fails rather than staying pending.
    onDead: async (tx, job) => void (await deliveries.failWithoutAttempt(tx, job.payload.delivery_id, job.id)),
  });
  return worker;
}

async function attempt(
  deps: WebhooksDeps,
  worker: JobWorker<DeliveryJob>,
  job: Job<DeliveryJob>,
  signal: AbortSignal,
): Promise<void | typeof SUCCESS_RECORDED> {
  const { pool, settings } = deps;
  const work = await deliveries.findWork(pool, job.payload.delivery_id);
  // Settled meanwhile (endpoint disabled, a retry made a newer job): nothing to do.
  if (!work || work.status !== 'pending' || work.job_id !== job.id) return;
  if (!work.endpoint_live) {
    await deliveries.failWithoutAttempt(pool, work.id, job.id);
    return;
  }
  const attemptedAt = new Date();
  const result = await sendSigned(deps.egress, {
    url: work.url,
    webhookId: work.event_id,
    body: work.payload,
    timeoutMs: settings.timeoutMs,
    signal,
    secrets: work.secrets.map((c) => deps.keyring.decryptCached(c, secretContext(work.tenant_id, work.endpoint_id))),
  });
  const delay =
    result.success || result.gone ? undefined : nextDelay(settings.retrySchedule, job.attempt, result.retryAfterMs);
  const status = result.success ? 'succeeded' : delay === undefined ? 'failed' : 'pending';
  const outcome = {
    deliveryId: work.id,
    jobId: job.id,
    status,
    nextAttemptInMs: status === 'pending' ? delay! : null,
    attemptId: newId(),
    attemptedAt,
    httpStatus: result.httpStatus ?? null,
    responseTimeMs: result.responseTimeMs,
    error: result.error ?? null,
    trigger: work.trigger,
    success: result.success,
  } as const;
  if (result.success) {
    // The common case in one statement, the job's end with it.
    await deliveries.recordAttempt(pool, outcome, worker.succeeded(job, 12));
    return SUCCESS_RECORDED;
  }
  await withTransaction(pool, async (tx) => {
    const endpoint = await deliveries.recordAttempt(tx, outcome);
    if (!endpoint) return;
    if (result.gone) {
      await disableBySystem(
        tx,
        work.tenant_id,
        work.endpoint_id,
        'the receiver answered 410 Gone; enable the endpoint again (PATCH is_enabled true) once it accepts deliveries',
      );
    } else if (
      endpoint.is_enabled &&
      endpoint.failing_since &&
      endpoint.failing_since.getTime() <= Date.now() - settings.disableAfterMs &&
      (status === 'failed' || (await deliveries.hasFailedSince(tx, work.endpoint_id, endpoint.failing_since)))
    ) {
      await disableBySystem(
        tx,
        work.tenant_id,
        work.endpoint_id,
        `no successful delivery for ${days(settings.disableAfterMs)}; fix the receiver, then enable the endpoint again (PATCH is_enabled true) and retry failed events`,
      );
    }
  });
  if (status === 'pending') throw new RetryLater(delay!, result.error);
  throw new PermanentFailure(result.error ?? 'failed');
}
