-- The transactional outbox (shared by every service's database): a change and its events commit
-- together; the relay publishes pending rows in seq order and marks them published afterwards.
CREATE TABLE IF NOT EXISTS outbox (
  seq           bigserial PRIMARY KEY,
  id            uuid NOT NULL UNIQUE,
  tenant_id     uuid NOT NULL,
  event_type    text NOT NULL,
  resource_type text NOT NULL,
  resource_id   text NOT NULL,
  payload       bytea NOT NULL,
  headers       jsonb NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (seq) WHERE published_at IS NULL;
