-- Webhook endpoints of each tenant (contract §5 Webhooks).
CREATE TABLE webhook_endpoints (
  id              uuid PRIMARY KEY,
  tenant_id       uuid NOT NULL,
  url             text NOT NULL,
  description     text,
  -- Names from the catalogue or `<resource_type>.*`; empty: every type.
  event_types     text[] NOT NULL DEFAULT '{}',
  -- Empty: every channel.
  channels        text[] NOT NULL DEFAULT '{}',
  metadata        jsonb NOT NULL DEFAULT '{}',
  is_enabled      boolean NOT NULL DEFAULT true,
  disabled_at     timestamptz,
  disabled_reason text,
  -- The failure streak: the first failed attempt since the last success (NULL: none).
  failing_since   timestamptz,
  last_success_at timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz
);
CREATE INDEX webhook_endpoints_list ON webhook_endpoints (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- Signing secrets, encrypted with the keyring. The current one has expires_at NULL; a rotated-out
-- one keeps signing until expires_at (WEBHOOK_SECRET_GRACE).
CREATE TABLE webhook_endpoint_secrets (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  secret      text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz
);
CREATE INDEX webhook_endpoint_secrets_endpoint ON webhook_endpoint_secrets (endpoint_id, created_at DESC);

-- A domain event that matched at least one enabled endpoint. payload is the exact body sent. Its
-- status is derived from its deliveries when read (never stored: two deliveries finishing at once
-- could otherwise each compute it from a snapshot without the other's outcome).
CREATE TABLE webhook_events (
  id         uuid PRIMARY KEY,
  tenant_id  uuid NOT NULL,
  event_type text NOT NULL,
  channels   text[] NOT NULL,
  payload    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_list ON webhook_events (tenant_id, created_at DESC, id DESC);
CREATE INDEX webhook_events_retention ON webhook_events (created_at);

-- One event to one endpoint. Its attempts run as jobs (@workauto/jobs, queue webhook-deliveries,
-- key = endpoint id); job_id is the job that currently owns it (a retry makes a new one).
CREATE TABLE webhook_deliveries (
  id              uuid PRIMARY KEY,
  tenant_id       uuid NOT NULL,
  event_id        uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
  endpoint_id     uuid NOT NULL REFERENCES webhook_endpoints (id),
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempt_count   integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  trigger         text NOT NULL DEFAULT 'scheduled' CHECK (trigger IN ('scheduled', 'manual')),
  job_id          uuid,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, status);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
  id               uuid PRIMARY KEY,
  tenant_id        uuid NOT NULL,
  delivery_id      uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempted_at     timestamptz NOT NULL,
  http_status      integer,
  response_time_ms integer,
  error_message    text,
  trigger          text NOT NULL CHECK (trigger IN ('scheduled', 'manual'))
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, attempted_at);
