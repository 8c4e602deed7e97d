-- last_success_at was written by every successful delivery and read by nothing (the API has no such
-- field); the write made each endpoint's row the hot spot of delivery recording. failing_since
-- (the auto-disable streak) is what the product uses.
ALTER TABLE webhook_endpoints DROP COLUMN last_success_at;
