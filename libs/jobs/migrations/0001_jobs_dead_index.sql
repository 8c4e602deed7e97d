-- no-transaction
-- Dead jobs are deleted after the worker's keepDeadMs (default 7 days), as succeeded ones are after
-- keepSucceededMs: the sweep finds them through this index. Built CONCURRENTLY: a plain CREATE INDEX
-- blocks every write to jobs (each enqueue, claim and finish) for as long as it builds, during an
-- upgrade while the previous release serves (installs that applied it before were not concurrent).
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_dead ON jobs (queue, finished_at) WHERE state = 'dead';
