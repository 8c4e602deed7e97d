-- Consumers delete processed event ids older than the redelivery window (twice the topics'
-- retention); this keeps that delete a range scan.
CREATE INDEX IF NOT EXISTS processed_events_processed_at ON processed_events (processed_at);
