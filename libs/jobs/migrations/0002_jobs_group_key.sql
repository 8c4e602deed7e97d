-- A second cap beside concurrency_key: at most the worker's maxPerGroup jobs of one group run at
-- once (the webhooks service groups a tenant's deliveries, so one tenant's slow receivers cannot
-- take every slot). NULL: no group.
ALTER TABLE jobs ADD COLUMN group_key text;
CREATE INDEX jobs_running_groups ON jobs (queue, group_key) WHERE state = 'running' AND group_key IS NOT NULL;
