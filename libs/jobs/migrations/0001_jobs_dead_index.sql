-- Dead jobs are deleted after the worker's keepDeadMs (default 7 days), as succeeded ones are after
-- keepSucceededMs: the sweep finds them through this index.
CREATE INDEX jobs_dead ON jobs (queue, finished_at) WHERE state = 'dead';
