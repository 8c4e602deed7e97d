/**
 * A run's events for its live view: its steps and its status changes, numbered by one sequence per
 * run (migrations/0006: triggers number them under the run's row lock, so an event is visible
 * exactly when the run's event_seq counts it).
 */
import type { Queryable } from '@workauto/db';
import type { RunRow, RunStatus, StepRow } from './runs.js';

/** A run as its event stream reads it: the run, its last event's number and its last status change's. */
export interface RunEventsView {
  run: RunRow;
  /** The number of the run's last event: every event up to it is visible now. */
  lastEventId: number;
  /** The number of its last status change (its terminal one once it ended). */
  lastStatusId: number;
  /** A run from before events were numbered whose status has not changed since: its status is this number, shown from the run itself. */
  legacyStatusId: number | null;
}

const TERMINAL: ReadonlySet<RunStatus> = new Set(['succeeded', 'failed', 'cancelled']);

export const isTerminal = (status: RunStatus) => TERMINAL.has(status);

/** The run (the tenant's, of the blueprint) and where its events stand; undefined when there is none. */
export async function runEventsView(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  id: string,
): Promise<RunEventsView | undefined> {
  const { rows } = await db.query<RunRow & { last_event_id: number; last_status_id: number | null; legacy: boolean }>(
    `SELECT r.*, coalesce(r.event_seq, legacy.n + 1) AS last_event_id,
            (SELECT max(e.event_id) FROM agent_run_status_events e WHERE e.run_id = r.id) AS last_status_id,
            r.event_seq IS NULL AS legacy
     FROM agent_runs r
     CROSS JOIN LATERAL (SELECT count(*) AS n FROM agent_run_steps s WHERE s.run_id = r.id AND r.event_seq IS NULL) legacy
     WHERE r.tenant_id = $1 AND r.agent_blueprint = $2 AND r.id = $3`,
    [tenantId, blueprint, id],
  );
  const row = rows[0];
  if (!row) return undefined;
  const lastEventId = row.last_event_id;
  return {
    run: row,
    lastEventId,
    lastStatusId: row.legacy ? lastEventId : (row.last_status_id ?? 0),
    legacyStatusId: row.legacy ? lastEventId : null,
  };
}

export type RunEvent = { id: number; kind: 'step'; step: StepRow } | { id: number; kind: 'status'; run: RunRow };

/**
 * The run's events numbered above `after` and at most `upTo`, in order. Call it with `upTo` at
 * most the lastEventId of a view read before: those events have all committed, so two reads
 * (steps, then statuses) cannot miss one that committed between them.
 */
export async function runEvents(
  db: Queryable,
  tenantId: string,
  view: RunEventsView,
  after: number,
  upTo: number,
): Promise<RunEvent[]> {
  const runId = view.run.id;
  const steps = await db.query<StepRow & { event_id: number }>(
    `SELECT coalesce(event_id, step_index + 1) AS event_id, step_index, type, started_at, ended_at, tool_name, arguments,
            result, is_error, input_tokens, output_tokens, cost_micro_cents
     FROM agent_run_steps WHERE tenant_id = $1 AND run_id = $2 AND coalesce(event_id, step_index + 1) BETWEEN $3 + 1 AND $4`,
    [tenantId, runId, after, upTo],
  );
  // The run as it was after each change: the stored row (without input) turned back into a row of
  // agent_runs, so it maps to the API's run as GET's does.
  const statuses = await db.query<RunRow & { event_id: number }>(
    `SELECT e.event_id, s.*
     FROM agent_run_status_events e
     JOIN agent_runs r ON r.id = e.run_id
     CROSS JOIN LATERAL jsonb_populate_record(NULL::agent_runs, e.run || jsonb_build_object('input', r.input)) s
     WHERE e.tenant_id = $1 AND e.run_id = $2 AND e.event_id BETWEEN $3 + 1 AND $4`,
    [tenantId, runId, after, upTo],
  );
  const events: RunEvent[] = [
    ...steps.rows.map((step) => ({ id: step.event_id, kind: 'step' as const, step })),
    ...statuses.rows.map((run) => ({ id: run.event_id, kind: 'status' as const, run })),
  ];
  if (view.legacyStatusId !== null && view.legacyStatusId > after && view.legacyStatusId <= upTo)
    events.push({ id: view.legacyStatusId, kind: 'status', run: view.run });
  return events.sort((a, b) => a.id - b.id);
}
