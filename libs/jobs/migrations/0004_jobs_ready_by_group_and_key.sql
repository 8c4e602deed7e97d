-- no-transaction
-- The claim of a capped queue walks the distinct (group, key) pairs with queued jobs and takes the
-- oldest due jobs of each pair that has room, so a group or key at its cap costs one index probe
-- however many jobs wait behind it (a scan in due order filtered out a capped backlog row by row).
-- NULL group or key is '' here (jobs' keys and groups are ids, never '').
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_ready_by_group_and_key ON jobs (queue, (coalesce(group_key, '')), (coalesce(concurrency_key, '')), next_attempt_at, id)
  WHERE state = 'queued';
