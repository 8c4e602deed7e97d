-- A tenant's configuration of one blueprint, with its own provider key (BYOK) encrypted by the keyring.
CREATE TABLE agent_configs (
  id                       uuid PRIMARY KEY,
  tenant_id                uuid NOT NULL,
  agent_blueprint          text NOT NULL,
  budget_default_cents     bigint CHECK (budget_default_cents >= 0),
  deadline_default_seconds integer CHECK (deadline_default_seconds BETWEEN 1 AND 86400),
  guardrails               jsonb NOT NULL DEFAULT '[]',
  schedule                 text,
  byok_status              text NOT NULL DEFAULT 'unset' CHECK (byok_status IN ('unset', 'valid', 'invalid', 'quota_exhausted')),
  byok_status_reason       text,
  byok_last_probed_at      timestamptz,
  -- The key: provider, keyring ciphertext (AAD binds tenant and blueprint), the keyring key id that
  -- wrapped it, and a version bumped by every stored key. Never returned by the API.
  byok_provider            text CHECK (byok_provider IN ('openai', 'anthropic')),
  byok_ciphertext          text,
  byok_key_id              text,
  byok_key_version         integer NOT NULL DEFAULT 0,
  -- Scheduler (internal): the next tick to run, and why the schedule is paused (5 failures in a row).
  schedule_next_at         timestamptz,
  schedule_failure_streak  integer NOT NULL DEFAULT 0,
  disable_reason           text,
  created_at               timestamptz NOT NULL DEFAULT now(),
  updated_at               timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, agent_blueprint),
  CHECK ((byok_ciphertext IS NULL) = (byok_provider IS NULL))
);
CREATE INDEX agent_configs_due ON agent_configs (schedule_next_at) WHERE schedule IS NOT NULL AND disable_reason IS NULL;

-- One run of a blueprint for a tenant. Claimed by workers through the jobs table (@workauto/jobs);
-- worker_id, last_heartbeat_at and claims are internal.
CREATE TABLE agent_runs (
  id                   uuid PRIMARY KEY,
  tenant_id            uuid NOT NULL,
  agent_blueprint      text NOT NULL,
  status               text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  input                jsonb,
  output               jsonb,
  run_at               timestamptz NOT NULL,
  budget_usd_cents     bigint CHECK (budget_usd_cents >= 0),
  deadline_seconds     integer CHECK (deadline_seconds BETWEEN 1 AND 86400),
  deadline_at          timestamptz,
  -- Cost in millionths of a cent (exact sums of per-token prices); the API shows whole cents, rounded up.
  cost_micro_cents     bigint NOT NULL DEFAULT 0,
  platform_fee_cents   bigint NOT NULL DEFAULT 0,
  used_platform_key    boolean NOT NULL DEFAULT false,
  failure_category     text,
  failure_detail       text,
  consecutive_failures integer NOT NULL DEFAULT 0,
  -- The tick of a scheduled run: one run per (tenant, blueprint, tick) across replicas.
  scheduled_for        timestamptz,
  worker_id            text,
  last_heartbeat_at    timestamptz,
  claims               integer NOT NULL DEFAULT 0,
  started_at           timestamptz,
  finished_at          timestamptz,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL DEFAULT now()
);
-- Runs of one tenant never share a created_at: the RFC 3339 cursor is exact.
CREATE UNIQUE INDEX agent_runs_created ON agent_runs (tenant_id, created_at);
CREATE INDEX agent_runs_list ON agent_runs (tenant_id, agent_blueprint, created_at DESC);
CREATE UNIQUE INDEX agent_runs_tick ON agent_runs (tenant_id, agent_blueprint, scheduled_for) WHERE scheduled_for IS NOT NULL;
