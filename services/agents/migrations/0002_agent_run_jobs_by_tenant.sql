-- Runs' jobs are grouped by tenant (AGENT_TENANT_CONCURRENCY caps a tenant's runs in flight); jobs
-- enqueued before carry no group and would run outside the cap.
UPDATE jobs SET group_key = payload->>'tenant_id'
WHERE queue = 'agent-runs' AND group_key IS NULL AND state IN ('queued', 'running');
