-- A second cap beside concurrency_key: at most the worker's maxPerGroup jobs of one group run at
-- once (the webhooks service groups a tenant's deliveries, so one tenant's slow receivers cannot
-- take every slot). NULL: no group. Its index is built concurrently by 0003 (installs that applied
-- this file before it was split have it already; 0003 then does nothing).
ALTER TABLE jobs ADD COLUMN group_key text;
