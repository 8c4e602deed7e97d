-- The relay deletes rows published more than a day ago; this keeps that a range scan.
CREATE INDEX IF NOT EXISTS outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;
