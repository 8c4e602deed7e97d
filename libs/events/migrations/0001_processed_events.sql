-- Consumers record each event they applied, in the transaction of its effect: a redelivered
-- event finds its row and is skipped, so applying is idempotent.
CREATE TABLE IF NOT EXISTS processed_events (
  group_id     text NOT NULL,
  event_id     uuid NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_id, event_id)
);
