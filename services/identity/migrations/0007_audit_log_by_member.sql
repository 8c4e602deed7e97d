-- no-transaction
-- The audit log's member_id filter, shaped like audit_log_by_actor (0004). CONCURRENTLY: the audit
-- consumer keeps inserting while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_member ON audit_log (tenant_id, member_id, created_at DESC, id DESC);
