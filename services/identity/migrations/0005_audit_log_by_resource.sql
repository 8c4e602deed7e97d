-- no-transaction
-- The audit log's resource_id filter (a resource's history), shaped like audit_log_by_actor (0003).
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_resource ON audit_log (tenant_id, resource_id, created_at DESC, id DESC);
