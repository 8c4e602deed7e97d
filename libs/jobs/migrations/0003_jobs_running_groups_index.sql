-- no-transaction
-- The running jobs of each group, counted at every claim under the per-group cap (0002). Built
-- CONCURRENTLY, so writes to jobs go on while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_running_groups ON jobs (queue, group_key) WHERE state = 'running' AND group_key IS NOT NULL;
