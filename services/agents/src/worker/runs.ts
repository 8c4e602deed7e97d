/**
 * Run workers: a run's job (@workauto/jobs, claimed with FOR UPDATE SKIP LOCKED under a renewed
 * lease) starts the run; the job's lease is the run's only one. The attempt writes steps, progress
 * and the end only while it holds that lease (in the same transaction), and looks at the run's
 * status every heartbeatMs to learn of a cancel (aborting the provider and tool calls in flight).
 * A worker that vanished loses its job's lease; the job comes back and the run is re-run once,
 * then failed `worker_lost` (the run's `claims` counts its starts). A worker stopping gives the job
 * back and the run goes back to queued in the same transaction.
 */
import type { CallerSigner } from '@workauto/grpc';
import type { Keyring } from '@workauto/crypto';
import { preparedStatement, withTransaction, type Pool, type PoolClient } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { SUCCESS_RECORDED, type Job, type JobWorker } from '@workauto/jobs';
import type { Logger } from '@workauto/logger';
import type { Worker } from '@workauto/service';
import { findBlueprint, type ProviderName } from '../domain/blueprints.js';
import { runModel } from '../domain/models.js';
import { platformFeeCents } from '../domain/costs.js';
import type { Guardrail } from '../domain/guardrails.js';
import { SOURCE, configData, keyContext, runData } from '../handlers/common.js';
import type { Providers } from '../providers/index.js';
import * as configs from '../repo/configs.js';
import * as runs from '../repo/runs.js';
import { agentContext, type ToolClients } from '../tools/clients.js';
import { execute, RunStop, type FailureCategory, type Outcome, type RunOutput } from './executor.js';
import { runQueue, type RunJob } from './queue.js';

export interface RunSettings {
  /** Runs one replica executes at once. */
  concurrency: number;
  /** Runs of one tenant in flight at once, across every replica. */
  tenantConcurrency: number;
  /** A job's lease; a worker that stops renewing it for this long has vanished. */
  leaseMs: number;
  /** How often a running run looks at its status for a cancel (at most 5 s: docs/agents.md "Runs"). */
  heartbeatMs: number;
  /** How often an idle worker looks for due runs. */
  pollMs: number;
  /** How often the scheduler looks for due schedule ticks. */
  schedulerPollMs: number;
}

export const DEFAULT_RUN_SETTINGS: RunSettings = {
  concurrency: 8,
  tenantConcurrency: 4,
  leaseMs: 30_000,
  heartbeatMs: 2_000,
  pollMs: 250,
  schedulerPollMs: 1_000,
};

/** A run is re-run once after its worker vanished; a third claim fails it worker_lost. */
const MAX_CLAIMS = 2;

export interface RunDeps {
  pool: Pool;
  keyring: Keyring;
  providers: Providers;
  clients: ToolClients;
  signer?: CallerSigner | undefined;
  platformKeys: Partial<Record<ProviderName, string>>;
  platformFeeBps: number;
  settings: RunSettings;
  logger: Logger;
}

/** The provider refused the tenant's own key during a run: byok_status follows (if the key was not replaced meanwhile). */
interface KeyRefusal {
  version: number;
  status: 'invalid' | 'quota_exhausted';
  reason: string;
}

const emptyOutput = (): RunOutput => ({ text: '', steps: 0, tool_calls: [] });

export class RunWorker {
  private readonly jobs: JobWorker<RunJob>;

  constructor(private readonly deps: RunDeps) {
    this.jobs = runQueue.worker(this.deps.pool, {
      logger: this.deps.logger,
      concurrency: this.deps.settings.concurrency,
      // Jobs are grouped by tenant (enqueueRun): at most this many of one tenant's runs at once, across replicas.
      maxPerGroup: this.deps.settings.tenantConcurrency,
      leaseMs: this.deps.settings.leaseMs,
      pollMs: this.deps.settings.pollMs,
      // The run's own deadline (at most 24 h) ends it first.
      attemptTimeoutMs: 86_400_000 + 60_000,
      handle: (job, signal) => this.handle(job, signal),
      // The job gave up (its attempts ran out outside the run, e.g. the database away through each): the run must not stay queued or running.
      onDead: (tx, job, reason) => this.abandon(tx, job.payload, reason),
      // Stopping: the run goes back to queued with its job, its claim not counted as a lost worker.
      onRelease: (tx, job) => runs.releaseRun(tx, job.payload.run_id),
    });
  }

  worker(): Worker {
    return { name: 'agent-runs', run: (ctx) => this.jobs.run(ctx) };
  }

  private async handle(job: Job<RunJob>, jobSignal: AbortSignal): Promise<void | typeof SUCCESS_RECORDED> {
    const { pool } = this.deps;
    const { tenant_id: tenantId, run_id: runId } = job.payload;
    const events = agentContext(tenantId, runId, jobSignal, this.deps.signer);
    const started = await withTransaction(pool, async (tx) => {
      const running = await runs.startRun(tx, tenantId, runId, MAX_CLAIMS);
      if (!running) {
        // Not startable: ended already, or its workers were lost too often (then it fails here).
        const row = await runs.runForWorker(tx, tenantId, runId, { lock: true });
        if (row?.status === 'running' && row.claims >= MAX_CLAIMS)
          await this.finish(tx, row, {
            status: 'failed',
            category: 'worker_lost',
            detail: `the worker running it vanished ${row.claims} times (crashed or cut off); create a new run`,
            output: (row.output as RunOutput | null) ?? emptyOutput(),
            costMicroCents: row.cost_micro_cents,
          });
        return undefined;
      }
      if (running.previous_status === 'queued')
        await recordEvent(tx, SOURCE, events, {
          type: 'agent_run.started',
          resourceType: 'agent_run',
          resourceId: runId,
          data: runData(running),
        });
      else
        this.deps.logger.warn(
          { run_id: runId, claims: running.claims },
          'agent run re-queued: the worker running it vanished; running it again',
        );
      return running;
    });
    if (!started) return;

    // The run's signal: the job's (lease lost, shutdown) and the status's (cancelled).
    const stop = new AbortController();
    const onJobAbort = () => stop.abort(new RunStop('released'));
    jobSignal.addEventListener('abort', onJobAbort, { once: true });
    if (jobSignal.aborted) onJobAbort();
    const beat = setInterval(() => {
      void runs.runStatus(pool, runId).then(
        (status) => {
          if (status !== 'running') stop.abort(new RunStop(status === 'cancelled' ? 'cancelled' : 'released'));
        },
        (err: unknown) =>
          this.deps.logger.warn(
            { err, run_id: runId },
            'could not look for a cancel of the agent run; retrying (is the database reachable?)',
          ),
      );
    }, this.deps.settings.heartbeatMs);
    try {
      const { outcome, refused, usedPlatformKey } = await this.run(started, job, stop.signal);
      if (await this.record(started, job, outcome, refused, usedPlatformKey)) return SUCCESS_RECORDED;
    } finally {
      clearInterval(beat);
      jobSignal.removeEventListener('abort', onJobAbort);
    }
  }

  /** The run's key and loop. Everything that goes wrong becomes an Outcome with a category. */
  private async run(
    row: runs.StartedRun,
    job: Job<RunJob>,
    signal: AbortSignal,
  ): Promise<{ outcome: Outcome; refused?: KeyRefusal; usedPlatformKey?: boolean }> {
    const { pool, keyring } = this.deps;
    const blueprint = findBlueprint(row.agent_blueprint);
    // A run re-run after a lost worker keeps what its first attempt already cost.
    const spent = row.cost_micro_cents;
    const fail = (category: FailureCategory, detail: string) => ({
      outcome: { status: 'failed', category, detail, output: emptyOutput(), costMicroCents: spent } as Outcome,
    });
    if (!blueprint) return fail('internal', `blueprint ${row.agent_blueprint} is no longer offered by this deployment`);
    const { config, stored } = await configs.configForRun(pool, row.tenant_id, blueprint.id);
    const platform = new Set(
      (Object.entries(this.deps.platformKeys) as [ProviderName, string | undefined][]).flatMap(([p, k]) =>
        k ? [p] : [],
      ),
    );
    const chosen = runModel(config, stored, blueprint, platform);
    if ('failure' in chosen) return fail(chosen.failure.category, chosen.failure.detail);
    const { provider, model, baseUrl, price, platformKey: usedPlatformKey } = chosen.ok;
    let apiKey: string;
    if (stored) {
      try {
        apiKey = keyring.decryptCached(stored.ciphertext, keyContext(row.tenant_id, blueprint.id));
      } catch {
        return fail(
          'internal',
          'the stored provider key cannot be decrypted with ENCRYPTION_KEYS (was its keyring key removed?); set the key again with PUT byok-key',
        );
      }
    } else apiKey = this.deps.platformKeys[provider]!;
    const fee = (cost: number) => (usedPlatformKey ? platformFeeCents(cost, this.deps.platformFeeBps) : 0);
    try {
      const outcome = await execute(
        {
          providers: this.deps.providers,
          clients: this.deps.clients,
          warn: (fields, message) => this.deps.logger.warn({ ...fields, run_id: row.id }, message),
        },
        {
          blueprint,
          input: row.input,
          guardrails: (config?.guardrails ?? []) as Guardrail[],
          starterAccess: row.starter_access ?? undefined,
          provider,
          model,
          baseUrl,
          price,
          apiKey,
          budgetCents: row.budget_usd_cents,
          deadlineAt: row.deadline_at,
          signal,
          spentMicroCents: spent,
          actAs: (s) => agentContext(row.tenant_id, row.id, s, this.deps.signer),
          firstStepIndex: row.next_step,
          // The step and its NOTIFY under the job's lease, with the cost and output so far after a
          // provider call: one statement (runs.insertStep).
          recordStep: async (step, progress) => {
            await runs.insertStep(
              pool,
              row.id,
              step,
              this.jobs.lease(job, 13),
              progress && {
                costMicroCents: progress.costMicroCents,
                feeCents: fee(progress.costMicroCents),
                output: progress.output,
                usedPlatformKey,
              },
            );
          },
        },
      );
      if (outcome.status === 'failed' && outcome.providerCategory && stored) {
        const status =
          outcome.providerCategory === 'insufficient_quota'
            ? 'quota_exhausted'
            : outcome.category === 'provider_auth'
              ? 'invalid'
              : undefined;
        if (status)
          return { outcome, refused: { version: stored.version, status, reason: outcome.detail }, usedPlatformKey };
      }
      return { outcome, usedPlatformKey };
    } catch (err) {
      this.deps.logger.error({ err, run_id: row.id }, 'agent run failed with an unexpected error');
      return {
        ...fail(
          'internal',
          'the run failed with an unexpected error on our side; the service log has the details (search for the run id)',
        ),
        usedPlatformKey,
      };
    }
  }

  /** Writes the run's end and ends its job in the same transaction; false if it wrote nothing. */
  private async record(
    row: runs.RunRow,
    job: Job<RunJob>,
    outcome: Outcome,
    refused: KeyRefusal | undefined,
    usedPlatformKey: boolean | undefined,
  ): Promise<boolean> {
    // Cancelled: the cancel wrote the run; released: onRelease did, or the lease went to another attempt.
    if (outcome.status === 'stopped') return false;
    return withTransaction(this.deps.pool, async (tx) => {
      // The job ends first, only while this attempt holds its lease (its row then stays locked
      // until the commit): the run's end and the job's in one transaction, one round trip fewer.
      const end = this.jobs.succeeded(job, 1);
      if (!(await tx.query(preparedStatement('agents_end_run_job', end.sql)(end.values))).rowCount) return false; // taken back: the run is another attempt's now
      // Written only while the run has not ended (finishRun): a cancel that came first wins.
      if (!(await this.finish(tx, row, outcome, usedPlatformKey))) return true;
      if (refused) {
        const config = await configs.setByokStatus(
          tx,
          row.tenant_id,
          row.agent_blueprint,
          refused.version,
          refused.status,
          refused.reason,
        );
        if (config) {
          await recordEvent(tx, SOURCE, agentContext(row.tenant_id, row.id, new AbortController().signal), {
            type: 'agent_config.updated',
            resourceType: 'agent_config',
            resourceId: config.id,
            data: configData(config),
            metadata: { byok_status: refused.status },
          });
        }
      }
      return true;
    });
  }

  /** A run whose job gave up: failed, `worker_lost` if it was running, `internal` if it never started. */
  private async abandon(tx: PoolClient, job: RunJob, reason: string): Promise<void> {
    const row = await runs.runForWorker(tx, job.tenant_id, job.run_id, { lock: true });
    if (!row || (row.status !== 'queued' && row.status !== 'running')) return;
    this.deps.logger.warn({ run_id: row.id, reason }, 'agent run abandoned: its job ran out of attempts');
    await this.finish(
      tx,
      row,
      row.status === 'running'
        ? {
            status: 'failed',
            category: 'worker_lost',
            detail:
              'the worker running it vanished (crashed or cut off) and the run could not be taken up again; create a new run',
            output: (row.output as RunOutput | null) ?? emptyOutput(),
            costMicroCents: row.cost_micro_cents,
          }
        : {
            status: 'failed',
            category: 'internal',
            detail:
              'the run could not be started after repeated attempts (was the database or the service unavailable?); create a new run',
            output: emptyOutput(),
            costMicroCents: row.cost_micro_cents,
          },
    );
  }

  /** Writes a run's end with its streak, the schedule's streak and the event; false if it had ended already (a cancel came first). */
  private async finish(
    tx: PoolClient,
    row: runs.RunRow,
    outcome: Exclude<Outcome, { status: 'stopped' }>,
    /** Whether the ending attempt called with a platform key; undefined: as the run's row says. */
    usedPlatformKey?: boolean,
  ): Promise<boolean> {
    const failed = outcome.status === 'failed';
    // A success ends any streak: it needs neither the previous run's count nor the per-blueprint lock
    // that serialises failures (taken for every run, it made all of a blueprint's runs end one at a time).
    const before = failed ? await runs.streakBefore(tx, row.tenant_id, row.agent_blueprint, row.id) : 0;
    const ended = await runs.finishRun(tx, row.id, {
      status: outcome.status,
      output: outcome.output,
      costMicroCents: outcome.costMicroCents,
      // Charged only if the run used a platform key (this attempt's, else as its row says).
      feeCents: platformFeeCents(outcome.costMicroCents, this.deps.platformFeeBps),
      usedPlatformKey,
      failureCategory: failed ? outcome.category : null,
      failureDetail: failed ? outcome.detail : null,
      consecutiveFailures: failed ? before + 1 : 0,
    });
    if (!ended) return false;
    const { paused } = await configs.recordRunResult(tx, row.tenant_id, row.agent_blueprint, failed);
    await recordEvent(tx, SOURCE, agentContext(row.tenant_id, row.id, new AbortController().signal), {
      type: failed ? 'agent_run.failed' : 'agent_run.succeeded',
      resourceType: 'agent_run',
      resourceId: row.id,
      data: runData(ended),
      ...(failed
        ? { metadata: { failure_category: outcome.category, ...(paused ? { schedule_paused: true } : {}) } }
        : {}),
    });
    return true;
  }
}
