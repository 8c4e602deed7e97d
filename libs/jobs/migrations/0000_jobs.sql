-- Leased jobs of this service (@workauto/jobs): one row per job, claimed with FOR UPDATE SKIP LOCKED.
CREATE TABLE jobs (
  id               uuid PRIMARY KEY,
  queue            text NOT NULL,
  -- Jobs with the same key run at most max_per_key at once (e.g. one webhook endpoint); NULL: no cap.
  concurrency_key  text,
  payload          jsonb NOT NULL,
  state            text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'succeeded', 'dead')),
  attempts         integer NOT NULL DEFAULT 0,
  max_attempts     integer NOT NULL CHECK (max_attempts >= 1),
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  -- Who runs the current attempt and until when; a lease not renewed in time is taken back.
  lease_owner      text,
  lease_expires_at timestamptz,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
);
CREATE INDEX jobs_ready ON jobs (queue, next_attempt_at, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (queue, concurrency_key) WHERE state = 'running';
CREATE INDEX jobs_leases ON jobs (queue, lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_succeeded ON jobs (queue, finished_at) WHERE state = 'succeeded';
