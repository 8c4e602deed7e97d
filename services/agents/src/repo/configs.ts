import { newId, preparedStatement, type Queryable } from '@workauto/db';

// bigint columns arrive as numbers (@workauto/db parses INT8; the values here stay far below 2^53).
import type { ProviderName } from '../domain/blueprints.js';

export type ByokStatus = 'unset' | 'valid' | 'invalid' | 'quota_exhausted';

export interface ConfigRow {
  id: string;
  tenant_id: string;
  agent_blueprint: string;
  budget_default_cents: number | null;
  deadline_default_seconds: number | null;
  guardrails: unknown[];
  schedule: string | null;
  byok_status: ByokStatus;
  byok_status_reason: string | null;
  byok_last_probed_at: Date | null;
  byok_provider: ProviderName | null;
  byok_key_version: number;
  schedule_next_at: Date | null;
  schedule_failure_streak: number;
  disable_reason: string | null;
  provider: ProviderName | null;
  model: string | null;
  /** The server the stored key was checked against and runs call; only with a key (domain/models.ts). */
  base_url: string | null;
  input_price_cents_per_mtok: number | null;
  output_price_cents_per_mtok: number | null;
  created_at: Date;
  updated_at: Date;
}

/** The stored key of a config (only the executor reads it, to decrypt for a run). */
export interface StoredKey {
  provider: ProviderName;
  ciphertext: string;
  version: number;
  /** The server it was checked against (null: the provider's own URL). */
  base_url: string | null;
}

// Never the ciphertext: a row read for the API cannot carry it by mistake.
const COLUMNS = `id, tenant_id, agent_blueprint, budget_default_cents, deadline_default_seconds, guardrails, schedule,
  byok_status, byok_status_reason, byok_last_probed_at, byok_provider, byok_key_version, schedule_next_at,
  schedule_failure_streak, disable_reason, provider, model, base_url, input_price_cents_per_mtok,
  output_price_cents_per_mtok, created_at, updated_at`;

export async function listConfigs(db: Queryable, tenantId: string): Promise<ConfigRow[]> {
  const { rows } = await db.query<ConfigRow>(
    `SELECT ${COLUMNS} FROM agent_configs WHERE tenant_id = $1 ORDER BY agent_blueprint`,
    [tenantId],
  );
  return rows;
}

export async function findConfig(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  opts: { lock?: boolean } = {},
): Promise<ConfigRow | undefined> {
  const { rows } = await db.query<ConfigRow>(
    `SELECT ${COLUMNS} FROM agent_configs WHERE tenant_id = $1 AND agent_blueprint = $2${opts.lock ? ' FOR UPDATE' : ''}`,
    [tenantId, blueprint],
  );
  return rows[0];
}

export interface ConfigFields {
  budget_default_cents: number | null;
  deadline_default_seconds: number | null;
  guardrails: unknown[];
  schedule: string | null;
  /** The schedule's first tick after now (null without a schedule). */
  schedule_next_at: Date | null;
  provider: ProviderName | null;
  model: string | null;
  base_url: string | null;
  input_price_cents_per_mtok: number | null;
  output_price_cents_per_mtok: number | null;
}

/** PUT: the config's fields replaced as a whole; a paused schedule resumes (streak and reason cleared). */
export async function replaceConfig(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  f: ConfigFields,
): Promise<ConfigRow> {
  const { rows } = await db.query<ConfigRow>(
    `INSERT INTO agent_configs (id, tenant_id, agent_blueprint, budget_default_cents, deadline_default_seconds, guardrails, schedule,
       schedule_next_at, provider, model, base_url, input_price_cents_per_mtok, output_price_cents_per_mtok)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (tenant_id, agent_blueprint) DO UPDATE SET
       budget_default_cents = EXCLUDED.budget_default_cents, deadline_default_seconds = EXCLUDED.deadline_default_seconds,
       guardrails = EXCLUDED.guardrails, schedule = EXCLUDED.schedule, schedule_next_at = EXCLUDED.schedule_next_at,
       provider = EXCLUDED.provider, model = EXCLUDED.model, base_url = EXCLUDED.base_url,
       input_price_cents_per_mtok = EXCLUDED.input_price_cents_per_mtok, output_price_cents_per_mtok = EXCLUDED.output_price_cents_per_mtok,
       schedule_failure_streak = 0, disable_reason = NULL, updated_at = now()
     RETURNING ${COLUMNS}`,
    [
      newId(),
      tenantId,
      blueprint,
      f.budget_default_cents,
      f.deadline_default_seconds,
      JSON.stringify(f.guardrails),
      f.schedule,
      f.schedule_next_at,
      f.provider,
      f.model,
      f.base_url,
      f.input_price_cents_per_mtok,
      f.output_price_cents_per_mtok,
    ],
  );
  return rows[0]!;
}

/**
 * A key that passed its probe: stored encrypted (version + 1), status valid, probed now, with the
 * server it was probed at as the config's base_url. Creates the config if needed.
 */
export async function storeKey(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  key: { provider: ProviderName; ciphertext: string; keyId: string; baseUrl: string | null },
): Promise<ConfigRow> {
  const { rows } = await db.query<ConfigRow>(
    `INSERT INTO agent_configs (id, tenant_id, agent_blueprint, byok_provider, byok_ciphertext, byok_key_id, byok_key_version, byok_status,
       byok_last_probed_at, base_url)
     VALUES ($1, $2, $3, $4, $5, $6, 1, 'valid', now(), $7)
     ON CONFLICT (tenant_id, agent_blueprint) DO UPDATE SET
       byok_provider = EXCLUDED.byok_provider, byok_ciphertext = EXCLUDED.byok_ciphertext, byok_key_id = EXCLUDED.byok_key_id,
       byok_key_version = agent_configs.byok_key_version + 1, byok_status = 'valid', byok_status_reason = NULL,
       byok_last_probed_at = now(), base_url = EXCLUDED.base_url, updated_at = now()
     RETURNING ${COLUMNS}`,
    [newId(), tenantId, blueprint, key.provider, key.ciphertext, key.keyId, key.baseUrl],
  );
  return rows[0]!;
}

/** DELETE byok-key: the key and its server (base_url) are gone, status unset. Undefined when the tenant has no config for it. */
export async function clearKey(db: Queryable, tenantId: string, blueprint: string): Promise<ConfigRow | undefined> {
  const { rows } = await db.query<ConfigRow>(
    `UPDATE agent_configs SET byok_provider = NULL, byok_ciphertext = NULL, byok_key_id = NULL, byok_status = 'unset',
       byok_status_reason = NULL, base_url = NULL, updated_at = now()
     WHERE tenant_id = $1 AND agent_blueprint = $2 RETURNING ${COLUMNS}`,
    [tenantId, blueprint],
  );
  return rows[0];
}

/** For a run: the config (if any) and its stored key (if any), in one read. */
export async function configForRun(
  db: Queryable,
  tenantId: string,
  blueprint: string,
): Promise<{ config: ConfigRow | undefined; stored: StoredKey | undefined }> {
  const { rows } = await db.query<ConfigRow & { byok_ciphertext: string | null }>(
    preparedStatement(
      'agents_config_for_run',
      `SELECT ${COLUMNS}, byok_ciphertext FROM agent_configs WHERE tenant_id = $1 AND agent_blueprint = $2`,
    )([tenantId, blueprint]),
  );
  const r = rows[0];
  if (!r) return { config: undefined, stored: undefined };
  const { byok_ciphertext: ciphertext, ...config } = r;
  return {
    config,
    stored:
      r.byok_provider && ciphertext
        ? { provider: r.byok_provider, ciphertext, version: r.byok_key_version, base_url: r.base_url }
        : undefined,
  };
}

/** Ciphertexts written with a keyring key other than the active one (for `re-encrypt` after a rotation). */
export async function keysNotUnder(
  db: Queryable,
  activeKeyId: string,
  limit: number,
): Promise<{ id: string; tenant_id: string; agent_blueprint: string; byok_ciphertext: string }[]> {
  const { rows } = await db.query<{ id: string; tenant_id: string; agent_blueprint: string; byok_ciphertext: string }>(
    `SELECT id, tenant_id, agent_blueprint, byok_ciphertext FROM agent_configs
     WHERE byok_ciphertext IS NOT NULL AND byok_key_id <> $1 ORDER BY id LIMIT $2`,
    [activeKeyId, limit],
  );
  return rows;
}

/** Rewraps one key under the active keyring key, if it is still the ciphertext that was read. */
export async function rewrapKey(
  db: Queryable,
  id: string,
  from: string,
  to: { ciphertext: string; keyId: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE agent_configs SET byok_ciphertext = $3, byok_key_id = $4 WHERE id = $1 AND byok_ciphertext = $2`,
    [id, from, to.ciphertext, to.keyId],
  );
  return rowCount === 1;
}

/** Prepared: it runs at every run's end, and planning it took most of its time (docs/benchmarks.md, "Agent runs"). */
const RECORD_RUN_RESULT = preparedStatement<[string, string, boolean]>(
  'agents_record_run_result',
  `UPDATE agent_configs SET
     schedule_failure_streak = CASE WHEN $3 THEN schedule_failure_streak + 1 ELSE 0 END,
     disable_reason = CASE WHEN $3 AND schedule IS NOT NULL AND disable_reason IS NULL AND schedule_failure_streak + 1 >= 5
                           THEN '5 runs failed in a row; PUT the config to resume the schedule' ELSE disable_reason END
   WHERE tenant_id = $1 AND agent_blueprint = $2 AND ($3 OR schedule_failure_streak <> 0)
   RETURNING (disable_reason IS NOT NULL) AS paused`,
);

/**
 * After a run's end: the schedule's failure streak (reset by a success); 5 in a row pause the
 * schedule. A success with no streak writes nothing (no lock on the config row for the common case).
 */
export async function recordRunResult(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  failed: boolean,
): Promise<{ paused: boolean }> {
  const { rows } = await db.query<{ paused: boolean }>(RECORD_RUN_RESULT([tenantId, blueprint, failed]));
  return { paused: rows[0]?.paused ?? false };
}

/** A run met the key's refusal: byok_status invalid or quota_exhausted, with why. Only if the key is still the one the run used. */
export async function setByokStatus(
  db: Queryable,
  tenantId: string,
  blueprint: string,
  keyVersion: number,
  status: ByokStatus,
  reason: string,
): Promise<ConfigRow | undefined> {
  const { rows } = await db.query<ConfigRow>(
    `UPDATE agent_configs SET byok_status = $4, byok_status_reason = $5, updated_at = now()
     WHERE tenant_id = $1 AND agent_blueprint = $2 AND byok_key_version = $3 AND byok_ciphertext IS NOT NULL
       AND (byok_status <> $4 OR byok_status_reason IS DISTINCT FROM $5)
     RETURNING ${COLUMNS}`,
    [tenantId, blueprint, keyVersion, status, reason],
  );
  return rows[0];
}

/** Configs whose schedule is due at `now`, locked for this scheduler (others skip them). */
export async function dueSchedules(tx: Queryable, now: Date, limit: number): Promise<ConfigRow[]> {
  const { rows } = await tx.query<ConfigRow>(
    `SELECT ${COLUMNS} FROM agent_configs
     WHERE schedule IS NOT NULL AND disable_reason IS NULL AND schedule_next_at <= $1
     ORDER BY schedule_next_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
  return rows;
}

export async function setNextTick(tx: Queryable, id: string, next: Date | null): Promise<void> {
  await tx.query(`UPDATE agent_configs SET schedule_next_at = $2 WHERE id = $1`, [id, next]);
}
