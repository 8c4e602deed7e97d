-- no-transaction
-- The iCalendar feed reads a calendar's live events in id order, a batch at a time.
CREATE INDEX CONCURRENTLY IF NOT EXISTS events_feed ON events (calendar_id, id) WHERE deleted_at IS NULL;
