-- A calendar's feed token (POST /calendars/{id}/feed-token): at most one per calendar, stored
-- only as the SHA-256 (hex) of the secret. GET /calendars/{id}/events.ics?token= finds its
-- calendar by that hash alone (it carries no tenant). A new token replaces the row; revoking the
-- token or deleting the calendar deletes it.
CREATE TABLE IF NOT EXISTS calendar_feed_tokens (
  calendar_id uuid PRIMARY KEY REFERENCES calendars (id),
  tenant_id   uuid NOT NULL,
  token_hash  text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
);
