/**
 * Probing apps: one probe (a real MCP session, then its result written under the app's row lock)
 * and the scheduled loop that probes every app once per APPS_PROBE_INTERVAL across all replicas.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Keyring } from '@workauto/crypto';
import { withTransaction, type Pool } from '@workauto/db';
import type { EgressPolicy } from '@workauto/egress';
import { recordEvent, type EventContext } from '@workauto/events';
import type { Logger } from '@workauto/logger';
import type { Worker, WorkerContext } from '@workauto/service';
import { sessionTarget } from './credentials.js';
import { TOOL_LIMITS } from './domain/tools.js';
import { appData, SOURCE } from './handlers/common.js';
import { probeServer, type ProbeOutcome } from './mcp/operations.js';
import * as apps from './repo/apps.js';
import type { AppRow, ToolRow } from './repo/apps.js';

export interface ProberOptions {
  pool: Pool;
  keyring: Keyring;
  egress: EgressPolicy;
  logger: Logger;
  /** APPS_PROBE_INTERVAL: each app is probed once per interval. */
  intervalMs: number;
  /** One probe's timeout, manual and scheduled alike (10 s). */
  timeoutMs: number;
  /** Probes one replica runs at once (default 8). */
  concurrency?: number;
  /** How often the loop looks for due probes when nothing woke it (default 1 s). */
  pollMs?: number;
}

export class Prober {
  private readonly concurrency: number;
  private wakeUp: (() => void) | undefined;

  constructor(private readonly options: ProberOptions) {
    this.concurrency = options.concurrency ?? 8;
  }

  /** Asks this replica's loop to look for due probes now (an app was created or its URL changed). */
  wake(): void {
    this.wakeUp?.();
  }

  /**
   * Probes one app now and writes the result. Returns the app after it, or undefined when the app
   * is gone. A result is dropped when the app's URL or credential changed while the probe ran.
   */
  async probe(
    tenantId: string,
    appId: string,
    ctx: EventContext,
    opts: { scheduled: boolean; signal?: AbortSignal },
  ): Promise<{ row: AppRow; tools: ToolRow[] } | undefined> {
    const { pool, keyring, egress, timeoutMs } = this.options;
    const app = await apps.findAppById(pool, tenantId, appId);
    if (!app) return undefined;
    const outcome = await probeServer({ ...sessionTarget(keyring, app), egress, timeoutMs, signal: opts.signal });
    return withTransaction(
      pool,
      async (tx) => {
        const current = await apps.findAppById(tx, tenantId, appId, 'update');
        if (!current) return undefined;
        if (current.target_version !== app.target_version) {
          // Probed the old URL or secret: say nothing about the new one (a new probe is due for a URL change).
          if (opts.scheduled) await apps.releaseProbeLease(tx, appId);
          this.options.logger.debug(
            { app_id: appId, tenant_id: tenantId },
            "probe result dropped: the app's URL or credential changed while it ran",
          );
          return { row: current, tools: (await apps.toolsOf(tx, tenantId, [appId])).get(appId)! };
        }
        const row = await this.writeOutcome(tx, current, outcome, opts.scheduled);
        const tools = (await apps.toolsOf(tx, tenantId, [appId])).get(appId)!;
        if (row.status !== current.status) {
          await recordEvent(tx, SOURCE, ctx, {
            type: 'app.status_changed',
            resourceType: 'app',
            resourceId: row.id,
            data: appData(row, tools),
            metadata: { status: row.status, previous_status: current.status, status_reason: row.status_reason },
          });
        }
        return { row, tools };
      },
      opts.signal ? { signal: opts.signal } : {},
    );
  }

  private async writeOutcome(
    tx: Parameters<typeof apps.updateApp>[0],
    current: AppRow,
    outcome: ProbeOutcome,
    scheduled: boolean,
  ): Promise<AppRow> {
    const now = new Date();
    const lease = scheduled ? { probe_lease_until: null } : {};
    if (outcome.ok) {
      await apps.applyListing(tx, current.tenant_id, current.id, outcome.listing.tools, outcome.listing.complete);
      await apps.pruneTools(tx, current.tenant_id, current.id, TOOL_LIMITS.tools, TOOL_LIMITS.storedBytes);
      return apps.updateApp(tx, current.tenant_id, current.id, {
        status: 'healthy',
        status_reason: null,
        consecutive_probe_failures: 0,
        last_probed_at: now,
        last_healthy_at: now,
        ...lease,
      });
    }
    return apps.updateApp(tx, current.tenant_id, current.id, {
      status: outcome.failure.status,
      status_reason: outcome.failure.reason,
      consecutive_probe_failures: current.consecutive_probe_failures + 1,
      last_probed_at: now,
      ...lease,
    });
  }

  /** The scheduled probes of this replica: a service worker (@workauto/service). */
  worker(): Worker {
    return { name: 'app-probes', run: (ctx) => this.run(ctx) };
  }

  private async run(ctx: WorkerContext): Promise<void> {
    const { pool, logger, intervalMs, timeoutMs, pollMs = 1_000 } = this.options;
    // A claim outlives the probe (timeout plus the write); a replica that died mid-probe frees its apps after it.
    const leaseMs = timeoutMs * 2 + 10_000;
    const running = new Set<Promise<void>>();
    while (!ctx.signal.aborted) {
      ctx.beat();
      const free = this.concurrency - running.size;
      if (free > 0) {
        let due: apps.DueProbe[] = [];
        try {
          due = await apps.claimDueProbes(pool, free, intervalMs, leaseMs);
        } catch (err) {
          logger.warn({ err }, 'could not claim due app probes; retrying');
        }
        for (const app of due) {
          const done: Promise<void> = this.scheduledProbe(app, ctx.signal).finally(() => running.delete(done));
          running.add(done);
        }
        if (due.length === free) continue; // more may be due
      }
      const woken = new Promise<void>((resolve) => (this.wakeUp = resolve));
      await Promise.race([
        sleep(pollMs, undefined, { signal: ctx.signal }).catch(() => undefined),
        woken,
        ...(running.size >= this.concurrency ? [Promise.race(running)] : []),
      ]);
    }
    // Shutdown: in-flight probes end with the signal (their requests abort); their leases expire.
    await Promise.allSettled([...running]);
  }

  private async scheduledProbe(app: apps.DueProbe, signal: AbortSignal): Promise<void> {
    const ctx: EventContext = {
      tenantId: app.tenant_id,
      requestId: `probe-${randomUUID()}`,
      actor: { type: 'system', id: 'system' },
    };
    try {
      await this.probe(app.tenant_id, app.id, ctx, { scheduled: true, signal });
    } catch (err) {
      if (signal.aborted) return;
      this.options.logger.error({ err, app_id: app.id, tenant_id: app.tenant_id }, 'scheduled app probe failed');
    }
  }
}
