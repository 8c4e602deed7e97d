/** The webhooks service's settings and the environment variables they come from (README, docs/webhooks.md). */
import { vars, z } from '@workauto/config';
import { DEFAULT_SCHEDULE, parseSchedule } from './domain/schedule.js';

export interface WebhookSettings {
  /** Delay before each attempt (the first is usually 0). */
  retrySchedule: number[];
  /** One attempt's whole exchange. */
  timeoutMs: number;
  /** A test delivery's timeout (docs/webhooks.md "How it works": 10 s). */
  testTimeoutMs: number;
  /** How long a rotated-out secret keeps signing. */
  secretGraceMs: number;
  /** No success for this long (with a failed delivery in it) disables an endpoint. */
  disableAfterMs: number;
  /** Attempts in flight per endpoint across every replica. */
  endpointConcurrency: number;
  /** Attempts in flight per tenant across every replica (all its endpoints together). */
  tenantConcurrency: number;
  /** Attempts in flight in this process; 0 runs no delivery worker here (intake and API only). */
  workerConcurrency: number;
  /** A claimed attempt's lease, renewed while it runs; a dead worker's attempt runs again after it. */
  leaseMs: number;
  retentionDays: number;
  /** Endpoints a tenant may have (not deleted, enabled or not). */
  maxEndpoints: number;
}

const MAX_ENDPOINTS_RANGE = 'expected a whole number from 1 to 10000: the webhook endpoints one tenant may have';

export const webhookEnv = {
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .default(DEFAULT_SCHEDULE)
    .transform((text, ctx) => {
      const schedule = parseSchedule(text);
      if (!schedule || schedule.length > 20) {
        ctx.addIssue({
          code: 'custom',
          message:
            'expected 1 to 20 comma-separated durations, the delay before each attempt, e.g. 0s,5s,5m,30m,2h,5h,10h,10h',
        });
        return z.NEVER;
      }
      return schedule;
    }),
  WEBHOOK_TIMEOUT_MS: vars.milliseconds(15_000),
  WEBHOOK_SECRET_GRACE: vars.duration('24h'),
  WEBHOOK_DISABLE_AFTER: vars.duration('5d'),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(4),
  WEBHOOK_TENANT_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(32),
  WEBHOOK_WORKER_CONCURRENCY: z.coerce.number().int().min(0).max(1000).default(64),
  WEBHOOK_LEASE_MS: vars.milliseconds(30_000),
  WEBHOOK_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  WEBHOOK_MAX_ENDPOINTS: z.coerce
    .number({ error: MAX_ENDPOINTS_RANGE })
    .int(MAX_ENDPOINTS_RANGE)
    .min(1, MAX_ENDPOINTS_RANGE)
    .max(10_000, MAX_ENDPOINTS_RANGE)
    .default(100),
};

export function settingsFromEnv(env: z.infer<z.ZodObject<typeof webhookEnv>>): WebhookSettings {
  return {
    retrySchedule: env.WEBHOOK_RETRY_SCHEDULE,
    timeoutMs: env.WEBHOOK_TIMEOUT_MS,
    testTimeoutMs: 10_000,
    secretGraceMs: env.WEBHOOK_SECRET_GRACE,
    disableAfterMs: env.WEBHOOK_DISABLE_AFTER,
    endpointConcurrency: env.WEBHOOK_ENDPOINT_CONCURRENCY,
    tenantConcurrency: env.WEBHOOK_TENANT_CONCURRENCY,
    workerConcurrency: env.WEBHOOK_WORKER_CONCURRENCY,
    leaseMs: env.WEBHOOK_LEASE_MS,
    retentionDays: env.WEBHOOK_RETENTION_DAYS,
    maxEndpoints: env.WEBHOOK_MAX_ENDPOINTS,
  };
}

/** The defaults, for tests and make dev (each field may be overridden). */
export const defaultSettings = (): WebhookSettings => settingsFromEnv(z.object(webhookEnv).parse({}));
