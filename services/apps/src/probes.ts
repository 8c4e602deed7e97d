/**
 * Probing apps: one probe (a real MCP session, then its result written under the app's row lock)
 * and the schedule that probes every app once per APPS_PROBE_INTERVAL across all replicas: each
 * replica's periodic worker enqueues the probes of due apps, one job per app, and the probe jobs
 * are claimed across replicas under the job queue's lease (@workauto/jobs).
 */
import { randomUUID } from 'node:crypto';
import { withTransaction, type Pool } from '@workauto/db';
import type { EgressPolicy } from '@workauto/egress';
import { recordEvent, type EventContext } from '@workauto/events';
import { JobQueue, PeriodicWorker, type Clock, type Job } from '@workauto/jobs';
import type { Logger } from '@workauto/logger';
import type { Worker } from '@workauto/service';
import type { AppCredentials } from './credentials.js';
import { TOOL_LIMITS } from './domain/tools.js';
import { appData, partsOne, SOURCE, type AppParts } from './handlers/common.js';
import { listServerTools, probeOutcome, type ProbeOutcome } from './mcp/operations.js';
import { writeNeedsAuthorization } from './oauth/tokens.js';
import * as apps from './repo/apps.js';
import type { AppRow } from './repo/apps.js';

export interface ProberOptions {
  pool: Pool;
  /** Opens the app's credential for the probe's session (an OAuth app's token, refreshed). */
  credentials: AppCredentials;
  egress: EgressPolicy;
  logger: Logger;
  /** APPS_PROBE_INTERVAL: each app is probed once per interval. */
  intervalMs: number;
  /** One probe's timeout, manual and scheduled alike (10 s). */
  timeoutMs: number;
  /** Probes one replica runs at once (default 8). */
  concurrency?: number;
  /** How often a replica looks for due probes when nothing woke it (default 1 s). */
  pollMs?: number;
  /** The clock the schedule is read by (tests move one by hand); the system's by default. */
  clock?: Clock;
}

/** A scheduled probe: one job per due app, its key the app (one probe of an app at a time). */
interface ProbeJob {
  app_id: string;
  tenant_id: string;
}

const probeQueue = new JobQueue<ProbeJob>('app-probes');
/** Due apps taken per statement; a tick takes batches until fewer are due. */
const DUE_BATCH = 500;

export class Prober {
  private readonly schedule: PeriodicWorker;

  constructor(private readonly options: ProberOptions) {
    this.schedule = new PeriodicWorker({
      name: 'app-probe-schedule',
      // Every replica: the due apps' rows are taken with SKIP LOCKED, and a wake is this replica's.
      replicas: 'every',
      everyMs: options.pollMs ?? 1_000,
      logger: options.logger,
      ...(options.clock ? { clock: options.clock } : {}),
      tick: ({ now, beat }) => this.enqueueDue(now, beat),
    });
  }

  /** Asks this replica to look for due probes now (an app was created or its URL changed). */
  wake(): void {
    this.schedule.wake();
  }

  /**
   * Probes one app now and writes the result. Returns the app after it, or undefined when the app
   * is gone. A result is dropped when the app's URL or credential changed while the probe ran.
   */
  async probe(
    tenantId: string,
    appId: string,
    ctx: EventContext,
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ row: AppRow; parts: AppParts } | undefined> {
    const { pool, credentials, egress, timeoutMs } = this.options;
    const app = await apps.findAppById(pool, tenantId, appId);
    if (!app) return undefined;
    const outcome = await probeOutcome(
      credentials.use(app, ctx, (target) => listServerTools({ ...target, egress, timeoutMs, signal: opts.signal })),
    );
    return withTransaction(
      pool,
      async (tx) => {
        const current = await apps.findAppById(tx, tenantId, appId, 'update');
        if (!current) return undefined;
        if (current.target_version !== app.target_version) {
          // Probed the old URL or secret: say nothing about the new one (a new probe is due for a URL change).
          this.options.logger.debug(
            { app_id: appId, tenant_id: tenantId },
            "probe result dropped: the app's URL or credential changed while it ran",
          );
          return { row: current, parts: await partsOne(tx, current) };
        }
        if (!outcome.ok && outcome.failure.status === 'needs_authorization') {
          // Nothing was probed: an oauth2 app without a usable token waits for an admin's connect.
          const row =
            current.status === 'needs_authorization'
              ? current
              : await writeNeedsAuthorization(tx, current, outcome.failure.reason, ctx);
          return { row, parts: await partsOne(tx, row) };
        }
        const row = await this.writeOutcome(tx, current, outcome);
        const parts = await partsOne(tx, row);
        if (row.status !== current.status) {
          await recordEvent(tx, SOURCE, ctx, {
            type: 'app.status_changed',
            resourceType: 'app',
            resourceId: row.id,
            data: appData(row, parts),
            metadata: { status: row.status, previous_status: current.status, status_reason: row.status_reason },
          });
        }
        return { row, parts };
      },
      opts.signal ? { signal: opts.signal } : {},
    );
  }

  private async writeOutcome(
    tx: Parameters<typeof apps.updateApp>[0],
    current: AppRow,
    outcome: ProbeOutcome,
  ): Promise<AppRow> {
    const now = new Date();
    if (outcome.ok) {
      await apps.applyListing(tx, current.tenant_id, current.id, outcome.listing.tools, outcome.listing.complete);
      await apps.pruneTools(tx, current.tenant_id, current.id, TOOL_LIMITS.tools, TOOL_LIMITS.storedBytes);
      return apps.updateApp(tx, current.tenant_id, current.id, {
        status: 'healthy',
        status_reason: null,
        consecutive_probe_failures: 0,
        last_probed_at: now,
        last_healthy_at: now,
      });
    }
    return apps.updateApp(tx, current.tenant_id, current.id, {
      status: outcome.failure.status,
      status_reason: outcome.failure.reason,
      consecutive_probe_failures: current.consecutive_probe_failures + 1,
      last_probed_at: now,
    });
  }

  /** The schedule and the scheduled probes of this replica: service workers (@workauto/service). */
  workers(): Worker[] {
    const { pool, logger, timeoutMs, concurrency = 8 } = this.options;
    // A claim outlives the probe (timeout plus the write); a replica that died mid-probe frees its app after it.
    const leaseMs = timeoutMs * 2 + 10_000;
    const probes = probeQueue.worker(pool, {
      logger,
      concurrency,
      maxPerKey: 1,
      leaseMs,
      attemptTimeoutMs: leaseMs,
      // Enqueued probes wake the workers (listen); the poll only backs that up.
      listen: true,
      pollMs: 1_000,
      // A row per probe: kept a little while for operators, not the default day.
      keepSucceededMs: 600_000,
      handle: (job, signal) => this.scheduledProbe(job, signal),
    });
    return [this.schedule, probes];
  }

  /** Enqueues the probes of the apps due at `now` that have none waiting; their next slots move on. */
  private async enqueueDue(now: Date, beat: () => void): Promise<void> {
    for (;;) {
      const taken = await withTransaction(this.options.pool, async (tx) => {
        const due = await apps.takeDueProbes(tx, now, DUE_BATCH, this.options.intervalMs);
        const waiting = await probeQueue.queuedKeys(
          tx,
          due.map((d) => d.id),
        );
        await probeQueue.enqueueMany(
          tx,
          due
            .filter((d) => !waiting.has(d.id))
            .map((d) => ({
              payload: { app_id: d.id, tenant_id: d.tenant_id },
              // The next slot probes it again: a probe is not retried.
              options: { key: d.id, maxAttempts: 1 },
            })),
        );
        return due.length;
      });
      beat();
      if (taken < DUE_BATCH) return;
    }
  }

  private async scheduledProbe(job: Job<ProbeJob>, signal: AbortSignal): Promise<void> {
    const { app_id: appId, tenant_id: tenantId } = job.payload;
    const ctx: EventContext = {
      tenantId,
      requestId: `probe-${randomUUID()}`,
      actor: { type: 'system', id: 'system' },
    };
    try {
      await this.probe(tenantId, appId, ctx, { signal });
    } catch (err) {
      if (signal.aborted) return;
      this.options.logger.error({ err, app_id: appId, tenant_id: tenantId }, 'scheduled app probe failed');
    }
  }
}
