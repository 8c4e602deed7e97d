import { preparedStatement, type Queryable } from '@workauto/db';

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';
export type Trigger = 'scheduled' | 'manual';

export interface DeliveryRow {
  id: string;
  tenant_id: string;
  event_id: string;
  endpoint_id: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: Date | null;
  trigger: Trigger;
  job_id: string | null;
}

export interface AttemptRow {
  delivery_id: string;
  attempted_at: Date;
  http_status: number | null;
  response_time_ms: number | null;
  error_message: string | null;
  trigger: Trigger;
}

const COLUMNS = 'id, tenant_id, event_id, endpoint_id, status, attempt_count, next_attempt_at, trigger, job_id';

/** One event's deliveries, one per endpoint, in one statement. */
export async function insertDeliveries(
  db: Queryable,
  tenantId: string,
  eventId: string,
  rows: readonly { id: string; endpoint_id: string; job_id: string }[],
): Promise<void> {
  await db.query(
    `INSERT INTO webhook_deliveries (id, tenant_id, event_id, endpoint_id, job_id, next_attempt_at)
     SELECT id, $1, $2, endpoint_id, job_id, now() FROM unnest($3::uuid[], $4::uuid[], $5::uuid[]) AS d(id, endpoint_id, job_id)`,
    [tenantId, eventId, rows.map((r) => r.id), rows.map((r) => r.endpoint_id), rows.map((r) => r.job_id)],
  );
}

/** What an attempt needs, in one query: the delivery, its event's body, its endpoint's state and signing secrets (ciphertexts, newest first). */
export interface DeliveryWork extends DeliveryRow {
  payload: string;
  url: string;
  endpoint_live: boolean;
  secrets: string[];
}

const FIND_WORK = preparedStatement<[string]>(
  'webhooks_find_work',
  `SELECT d.id, d.tenant_id, d.event_id, d.endpoint_id, d.status, d.attempt_count, d.next_attempt_at, d.trigger, d.job_id,
          e.payload, w.url, (w.is_enabled AND w.deleted_at IS NULL) AS endpoint_live,
          ARRAY(SELECT s.secret FROM webhook_endpoint_secrets s WHERE s.endpoint_id = w.id AND (s.expires_at IS NULL OR s.expires_at > now())
                ORDER BY s.expires_at IS NULL DESC, s.created_at DESC) AS secrets
     FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id
    WHERE d.id = $1`,
);

export async function findWork(db: Queryable, id: string): Promise<DeliveryWork | undefined> {
  const { rows } = await db.query<DeliveryWork>(FIND_WORK([id]));
  return rows[0];
}

const RECORD_ATTEMPT_SQL = `d AS (
     UPDATE webhook_deliveries SET status = $3, attempt_count = attempt_count + 1, updated_at = now(),
            next_attempt_at = CASE WHEN $4::bigint IS NULL THEN NULL ELSE now() + $4::bigint * interval '1 millisecond' END
      WHERE id = $1 AND job_id = $2 AND status = 'pending'
      RETURNING id, tenant_id, endpoint_id),
   a AS (
     INSERT INTO webhook_attempts (id, tenant_id, delivery_id, attempted_at, http_status, response_time_ms, error_message, trigger)
     SELECT $5, d.tenant_id, d.id, $6, $7, $8, $9, $10 FROM d)
   UPDATE webhook_endpoints w
      SET failing_since = CASE WHEN $11 THEN NULL ELSE coalesce(w.failing_since, now()) END
     FROM d WHERE w.id = d.endpoint_id AND (NOT $11 OR w.failing_since IS NOT NULL)
   RETURNING w.is_enabled, w.failing_since`;
const RECORD_ATTEMPT = preparedStatement('webhooks_record_attempt', `WITH ${RECORD_ATTEMPT_SQL}`);

/**
 * An attempt's outcome in one statement (atomic, one round trip): the delivery's new state — only
 * while the job that made the attempt still owns it and it is pending (an endpoint disabled
 * meanwhile already failed it) —, the attempt, and the endpoint's failure streak (a success clears
 * it, a failure starts it). A success on an endpoint that was not failing leaves the endpoint's row
 * alone: every delivery rewriting its endpoint's row made that row the hot spot of the statement.
 * Returns the endpoint's state after a failure (undefined when nothing applied, and after a success).
 * With `jobSucceeded` (the queue's statement ending the attempt's job, parameters from $12) the
 * job ends in the same statement: a success costs one round trip, not two.
 */
export async function recordAttempt(
  db: Queryable,
  a: {
    deliveryId: string;
    jobId: string;
    status: DeliveryStatus;
    nextAttemptInMs: number | null;
    attemptId: string;
    attemptedAt: Date;
    httpStatus: number | null;
    responseTimeMs: number;
    error: string | null;
    trigger: Trigger;
    success: boolean;
  },
  jobSucceeded?: { sql: string; values: unknown[] },
): Promise<{ is_enabled: boolean; failing_since: Date | null } | undefined> {
  const statement = jobSucceeded
    ? preparedStatement('webhooks_record_success', `WITH job AS (${jobSucceeded.sql}), ${RECORD_ATTEMPT_SQL}`)
    : RECORD_ATTEMPT;
  const { rows } = await db.query<{ is_enabled: boolean; failing_since: Date | null }>(
    statement([
      a.deliveryId,
      a.jobId,
      a.status,
      a.nextAttemptInMs,
      a.attemptId,
      a.attemptedAt,
      a.httpStatus,
      a.responseTimeMs,
      a.error,
      a.trigger,
      a.success,
      ...(jobSucceeded?.values ?? []),
    ]),
  );
  return rows[0];
}

export async function deliveriesOf(db: Queryable, tenantId: string, eventId: string): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(
    `SELECT ${COLUMNS} FROM webhook_deliveries WHERE tenant_id = $1 AND event_id = $2 ORDER BY created_at, id`,
    [tenantId, eventId],
  );
  return rows;
}

export async function attemptsOf(
  db: Queryable,
  tenantId: string,
  deliveryIds: readonly string[],
): Promise<AttemptRow[]> {
  const { rows } = await db.query<AttemptRow>(
    `SELECT delivery_id, attempted_at, http_status, response_time_ms, error_message, trigger FROM webhook_attempts
      WHERE tenant_id = $1 AND delivery_id = ANY($2::uuid[]) ORDER BY attempted_at, id`,
    [tenantId, deliveryIds],
  );
  return rows;
}

/** Fails a delivery without an attempt (its endpoint is gone or disabled). */
export async function failWithoutAttempt(db: Queryable, id: string, jobId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, updated_at = now() WHERE id = $1 AND job_id = $2 AND status = 'pending'`,
    [id, jobId],
  );
  return rowCount === 1;
}

/** Every pending delivery of the endpoint becomes failed. */
export async function failPendingOf(db: Queryable, tenantId: string, endpointId: string): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, updated_at = now()
      WHERE tenant_id = $1 AND endpoint_id = $2 AND status = 'pending'`,
    [tenantId, endpointId],
  );
}

/** The event's failed deliveries whose endpoint exists and is enabled, locked. */
export async function retryableOf(
  db: Queryable,
  tenantId: string,
  eventId: string,
): Promise<{ id: string; endpoint_id: string }[]> {
  const { rows } = await db.query<{ id: string; endpoint_id: string }>(
    `SELECT d.id, d.endpoint_id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
      WHERE d.tenant_id = $1 AND d.event_id = $2 AND d.status = 'failed' AND w.is_enabled AND w.deleted_at IS NULL
      ORDER BY d.id FOR UPDATE OF d`,
    [tenantId, eventId],
  );
  return rows;
}

export async function requeue(db: Queryable, id: string, jobId: string): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries SET status = 'pending', trigger = 'manual', job_id = $2, next_attempt_at = now(), updated_at = now() WHERE id = $1`,
    [id, jobId],
  );
}

/** Whether the endpoint has a delivery that failed for good since `since`. */
export async function hasFailedSince(db: Queryable, endpointId: string, since: Date): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'failed' AND updated_at >= $2 LIMIT 1`,
    [endpointId, since],
  );
  return rows.length > 0;
}
