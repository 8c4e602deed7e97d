import {
  listPage,
  newestFirst,
  newId,
  preparedStatement,
  type PageQuery,
  type Queryable,
  type KeysetPage,
} from '@workauto/db';
import type { AccessLevels } from '@workauto/grpc';

export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

export interface RunRow {
  id: string;
  tenant_id: string;
  agent_blueprint: string;
  status: RunStatus;
  input: unknown;
  output: unknown;
  run_at: Date;
  budget_usd_cents: number | null;
  deadline_seconds: number | null;
  deadline_at: Date | null;
  cost_micro_cents: number;
  platform_fee_cents: number;
  used_platform_key: boolean;
  failure_category: string | null;
  failure_detail: string | null;
  consecutive_failures: number;
  scheduled_for: Date | null;
  /** The access levels of the member who started the run; null: not restricted (a scheduled run). Internal. */
  starter_access: AccessLevels | null;
  claims: number;
  created_at: Date;
  updated_at: Date;
}

/**
 * The channel every run status change and every step NOTIFYs, in the transaction of the change
 * (delivered on commit only): a replica serving a run's live progress LISTENs on it while another
 * replica executes the run. Payload: {"run_id", "tenant_id", "change": "status", "status"} or
 * {"run_id", "tenant_id", "change": "step", "index"} (docs/agents.md).
 */
export const RUN_CHANNEL = 'agent_runs';

/** Wraps a statement whose RETURNING gives run rows (`u`) so each row also NOTIFYs its status, in the same statement. */
const withStatusNotify = (statement: string) =>
  `WITH u AS (${statement})
   SELECT u.* FROM u CROSS JOIN LATERAL (SELECT pg_notify('${RUN_CHANNEL}',
     json_build_object('run_id', u.id, 'tenant_id', u.tenant_id, 'change', 'status', 'status', u.status)::text)) n`;

const COLUMNS = `id, tenant_id, agent_blueprint, status, input, output, run_at, budget_usd_cents, deadline_seconds, deadline_at,
  cost_micro_cents, platform_fee_cents, used_platform_key, failure_category, failure_detail, consecutive_failures,
  scheduled_for, starter_access, claims, created_at, updated_at`;

export interface NewRun {
  tenant_id: string;
  agent_blueprint: string;
  input: unknown;
  run_at: Date | null;
  budget_usd_cents: number | null;
  deadline_seconds: number | null;
  scheduled_for?: Date | null;
  starter_access?: AccessLevels | null;
}

/** Tries for a free created_at before giving up (each try follows a run that took the one tried before). */
const CREATED_AT_TRIES = 100;

/**
 * Inserts a queued run. Runs of one tenant never share a created_at, so the RFC 3339 cursor of the
 * runs list is exact: a run takes the current millisecond, or 1 ms after the tenant's latest run
 * if that is later; a unique index on (tenant_id, created_at) refuses a second run at the same
 * instant, and the insert that met it tries again. No lock: only inserts that meet on the very
 * same instant wait for each other. The instant is a whole
 * millisecond, not the API's microsecond (docs/api.md §4): responses carry timestamps as JS Dates
 * (milliseconds), and a created_at shown to the client must be the very value its cursor names
 * (docs/agents.md). A scheduled run that exists already for its tick inserts nothing (undefined).
 */
export async function insertRun(tx: Queryable, run: NewRun): Promise<RunRow | undefined> {
  const id = newId();
  for (let attempt = 0; attempt < CREATED_AT_TRIES; attempt++) {
    // Without a conflict target, DO NOTHING covers both unique indexes: the tick's and created_at's.
    const { rows } = await tx.query<RunRow>(
      withStatusNotify(`INSERT INTO agent_runs (id, tenant_id, agent_blueprint, input, run_at, budget_usd_cents, deadline_seconds, scheduled_for, starter_access, created_at)
       SELECT $1, $2, $3, $4, coalesce($5, now()), $6, $7, $8, $9,
              greatest(date_trunc('milliseconds', clock_timestamp()),
                       (SELECT max(created_at) + interval '1 millisecond' FROM agent_runs WHERE tenant_id = $2))
       ON CONFLICT DO NOTHING
       RETURNING ${COLUMNS}`),
      [
        id,
        run.tenant_id,
        run.agent_blueprint,
        JSON.stringify(run.input ?? null),
        run.run_at,
        run.budget_usd_cents,
        run.deadline_seconds,
        run.scheduled_for ?? null,
        run.starter_access ? JSON.stringify(run.starter_access) : null,
      ],
    );
    if (rows[0]) return rows[0];
    if (run.scheduled_for) {
      const taken = await tx.query(
        `SELECT 1 FROM agent_runs WHERE tenant_id = $1 AND agent_blueprint = $2 AND scheduled_for = $3`,
        [run.tenant_id, run.agent_blueprint, run.scheduled_for],
      );
      if (taken.rowCount) return undefined;
    }
  }
  throw new Error(`no free created_at for a run of tenant ${run.tenant_id} after ${CREATED_AT_TRIES} tries`);
}

export async function findRun(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  id: string,
  opts: { lock?: boolean } = {},
): Promise<RunRow | undefined> {
  const { rows } = await db.query<RunRow>(
    `SELECT ${COLUMNS} FROM agent_runs WHERE tenant_id = $1 AND agent_blueprint = $2 AND id = $3${opts.lock ? ' FOR UPDATE' : ''}`,
    [tenantId, blueprint, id],
  );
  return rows[0];
}

/** A run by id alone, for its worker (the job names the tenant too). */
export async function runForWorker(
  db: Queryable,
  tenantId: string,
  id: string,
  opts: { lock?: boolean } = {},
): Promise<RunRow | undefined> {
  const { rows } = await db.query<RunRow>(
    preparedStatement(
      opts.lock ? 'agents_run_for_worker_locked' : 'agents_run_for_worker',
      `SELECT ${COLUMNS} FROM agent_runs WHERE tenant_id = $1 AND id = $2${opts.lock ? ' FOR UPDATE' : ''}`,
    )([tenantId, id]),
  );
  return rows[0];
}

/**
 * A page of a blueprint's runs, newest first. The cursor is the created_at of the last run
 * returned (timestampCursor of @workauto/grpc): created_at is unique per tenant, so "strictly
 * older" is exact.
 */
export async function listRuns(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  status: RunStatus | undefined,
  page: PageQuery,
): Promise<KeysetPage<RunRow>> {
  return listPage<RunRow>(
    db,
    {
      columns: COLUMNS,
      from: 'agent_runs',
      where: `tenant_id = $1 AND agent_blueprint = $2 AND ($3::text IS NULL OR status = $3)`,
      params: [tenantId, blueprint, status ?? null],
      order: newestFirst(),
    },
    page,
  );
}

/** queued/running → cancelled (the streak stays as it was: a cancelled run does not change it). */
export async function cancelRun(tx: Queryable, tenantId: string, id: string): Promise<RunRow> {
  const { rows } = await tx.query<RunRow>(
    withStatusNotify(`UPDATE agent_runs SET status = 'cancelled', finished_at = now(), updated_at = now(),
       consecutive_failures = (SELECT coalesce((SELECT r.consecutive_failures FROM agent_runs r
                                 WHERE r.tenant_id = agent_runs.tenant_id AND r.agent_blueprint = agent_runs.agent_blueprint
                                   AND r.status IN ('succeeded', 'failed') ORDER BY r.finished_at DESC, r.id DESC LIMIT 1), 0))
     WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`),
    [tenantId, id],
  );
  return rows[0]!;
}

/*
 * The statements every run's worker makes, prepared once per connection (parsed and planned once:
 * planning was about a third of the agents database's time in bench-agents).
 */
const START_RUN = preparedStatement<[string, string, number]>(
  'agents_start_run',
  withStatusNotify(`UPDATE agent_runs SET status = 'running', claims = claims + 1,
     started_at = coalesce(started_at, now()),
     deadline_at = coalesce(deadline_at, now() + deadline_seconds * interval '1 second'),
     consecutive_failures = 0, updated_at = now()
   FROM (SELECT id AS startable_id, status AS previous_status FROM agent_runs
         WHERE tenant_id = $1 AND id = $2 AND status IN ('queued', 'running') AND claims < $3 FOR UPDATE) startable
   WHERE id = startable_id RETURNING ${COLUMNS}, previous_status,
     (SELECT coalesce(max(s.step_index) + 1, 0) FROM agent_run_steps s WHERE s.run_id = agent_runs.id)::int AS next_step`),
);

/** A run as its start returned it: the status it had, and where its next step goes. */
export type StartedRun = RunRow & {
  previous_status: RunStatus;
  /** After the steps of its earlier attempts (a re-run after a lost or stopped worker keeps them). */
  next_step: number;
};

/**
 * A run a worker claimed (its job's lease is the run's lease), if it may start: queued, or
 * running with fewer than `maxClaims` starts (its worker was lost). Then running, one more start
 * counted (first start: started_at and deadline_at set now), the status it had and its next
 * step's index. Undefined otherwise: the worker reads the run to say why (runForWorker). One
 * statement where the common case took a locked read, an update and a read of its steps.
 */
export async function startRun(
  tx: Queryable,
  tenantId: string,
  id: string,
  maxClaims: number,
): Promise<StartedRun | undefined> {
  const { rows } = await tx.query<StartedRun>(START_RUN([tenantId, id, maxClaims]));
  return rows[0];
}

/** A run's status now (its worker looks for a cancel). */
export async function runStatus(db: Queryable, id: string): Promise<RunStatus | undefined> {
  const { rows } = await db.query<{ status: RunStatus }>(`SELECT status FROM agent_runs WHERE id = $1`, [id]);
  return rows[0]?.status;
}

/** One step of a run as stored (text already cut and cleaned of secrets: domain/steps.ts). */
export interface StepRow {
  step_index: number;
  type: 'model_call' | 'tool_call';
  started_at: Date;
  ended_at: Date;
  tool_name: string | null;
  arguments: unknown;
  result: string | null;
  is_error: boolean | null;
  input_tokens: number | null;
  output_tokens: number | null;
  cost_micro_cents: number | null;
}

const STEP_COLUMNS = `step_index, type, started_at, ended_at, tool_name, arguments, result, is_error, input_tokens,
  output_tokens, cost_micro_cents`;

/**
 * What a run has cost and answered so far, written with the step of each provider call, and
 * whether its attempt calls with a platform key (whose runs pay the platform fee): the run's row
 * says so from its attempt's first step on, for the ends that do not know the key (abandon).
 */
export interface RunProgress {
  costMicroCents: number;
  feeCents: number;
  output: unknown;
  usedPlatformKey: boolean;
}

/**
 * A step that ended, written while the run is running (or was cancelled while it ran), and its
 * NOTIFY: one statement, written only while `lease` (the job queue's lease query, parameters from
 * $13) finds the attempt's lease, which it locks until the statement's transaction ends. With
 * `progress` (after a provider call) the run's cost and output so far are written in the same
 * statement, only when the step was (kept on a run cancelled meanwhile too): one round trip and
 * one commit where a transaction took four. False when the run is no longer running or the lease
 * is gone.
 */
export async function insertStep(
  db: Queryable,
  runId: string,
  step: StepRow,
  lease: { sql: string; values: unknown[] },
  progress?: RunProgress,
): Promise<boolean> {
  const p = 13 + lease.values.length; // the progress's parameters follow the lease's
  const { rows } = await db.query(
    preparedStatement(
      progress ? 'agents_insert_step_with_progress' : 'agents_insert_step',
      // With progress, the run's row is updated first and the step inserted from what the update
      // returned, its event id included: the update takes the run's next event number itself, so the
      // step's insert trigger (agent_run_steps_number) does not write the row a second time. Without
      // progress the trigger numbers the step (its own UPDATE of the run's row).
      `WITH lease AS (${lease.sql}),
     ${
       progress
         ? `run AS (
       UPDATE agent_runs r SET cost_micro_cents = $${p}, platform_fee_cents = $${p + 1}, output = $${p + 2},
              used_platform_key = $${p + 3}, event_seq = agent_run_next_event(r), updated_at = now()
        WHERE id = $1 AND status IN ('running', 'cancelled') AND EXISTS (SELECT 1 FROM lease)
       RETURNING tenant_id, id, event_seq),`
         : `run AS (SELECT tenant_id, id, NULL::bigint AS event_seq FROM agent_runs WHERE id = $1 AND status IN ('running', 'cancelled') AND EXISTS (SELECT 1 FROM lease)),`
     }
     ins AS (
       INSERT INTO agent_run_steps (tenant_id, run_id, event_id, ${STEP_COLUMNS})
       SELECT r.tenant_id, r.id, r.event_seq, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM run r
       RETURNING tenant_id, run_id, step_index)
     SELECT 1 FROM ins CROSS JOIN LATERAL (SELECT pg_notify('${RUN_CHANNEL}',
       json_build_object('run_id', ins.run_id, 'tenant_id', ins.tenant_id, 'change', 'step', 'index', ins.step_index)::text)) n`,
    )([
      runId,
      step.step_index,
      step.type,
      step.started_at,
      step.ended_at,
      step.tool_name,
      step.arguments === undefined || step.arguments === null ? null : JSON.stringify(step.arguments),
      step.result,
      step.is_error,
      step.input_tokens,
      step.output_tokens,
      step.cost_micro_cents,
      ...lease.values,
      ...(progress
        ? [progress.costMicroCents, progress.feeCents, JSON.stringify(progress.output), progress.usedPlatformKey]
        : []),
    ]),
  );
  return rows.length === 1;
}

/** A run's steps in order (the run's tenant only). */
export async function listSteps(db: Queryable, tenantId: string, runId: string): Promise<StepRow[]> {
  const { rows } = await db.query<StepRow>(
    `SELECT ${STEP_COLUMNS} FROM agent_run_steps WHERE tenant_id = $1 AND run_id = $2 ORDER BY step_index`,
    [tenantId, runId],
  );
  return rows;
}

/**
 * The failure streak before this run: consecutive_failures of the tenant's blueprint's latest
 * finished run. Serialised per (tenant, blueprint) so two runs finishing at once count in turn.
 */
export async function streakBefore(tx: Queryable, tenantId: string, blueprint: string, id: string): Promise<number> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('agent_run_streak:' || $1 || ':' || $2, 0))`, [
    tenantId,
    blueprint,
  ]);
  const { rows } = await tx.query<{ consecutive_failures: number }>(
    `SELECT consecutive_failures FROM agent_runs WHERE tenant_id = $1 AND agent_blueprint = $2 AND id <> $3 AND status IN ('succeeded', 'failed')
     ORDER BY finished_at DESC, id DESC LIMIT 1`,
    [tenantId, blueprint, id],
  );
  return rows[0]?.consecutive_failures ?? 0;
}

export interface Finish {
  status: 'succeeded' | 'failed';
  output: unknown;
  costMicroCents: number;
  /** The platform fee of that cost: written only if the run used a platform key. */
  feeCents: number;
  /** Whether the attempt that ends it called with a platform key; undefined when no attempt chose a key (the row says). */
  usedPlatformKey: boolean | undefined;
  failureCategory: string | null;
  failureDetail: string | null;
  consecutiveFailures: number;
}

const FINISH_RUN = preparedStatement(
  'agents_finish_run',
  withStatusNotify(`UPDATE agent_runs SET status = $2, output = $3, cost_micro_cents = $4,
     used_platform_key = coalesce($9, used_platform_key),
     platform_fee_cents = CASE WHEN coalesce($9, used_platform_key) THEN $5 ELSE platform_fee_cents END, failure_category = $6,
     failure_detail = $7, consecutive_failures = $8, finished_at = now(), updated_at = now()
   WHERE id = $1 AND status IN ('queued', 'running') RETURNING ${COLUMNS}`),
);

/**
 * A run's end, written only while it has not ended (a cancel that came first wins): running, or
 * still queued when its job gave up before it could start (the worker's abandon).
 */
export async function finishRun(tx: Queryable, id: string, f: Finish): Promise<RunRow | undefined> {
  const { rows } = await tx.query<RunRow>(
    FINISH_RUN([
      id,
      f.status,
      JSON.stringify(f.output),
      f.costMicroCents,
      f.feeCents,
      f.failureCategory,
      f.failureDetail,
      f.consecutiveFailures,
      f.usedPlatformKey ?? null,
    ]),
  );
  return rows[0];
}

/**
 * A run whose worker stopped (shutdown): queued again, its start not counted as a lost worker.
 * In the transaction that gives its job back to the queue.
 */
export async function releaseRun(db: Queryable, id: string): Promise<void> {
  await db.query(
    withStatusNotify(`UPDATE agent_runs SET status = 'queued', claims = greatest(claims - 1, 0), updated_at = now()
     WHERE id = $1 AND status = 'running' RETURNING id, tenant_id, status`),
    [id],
  );
}
