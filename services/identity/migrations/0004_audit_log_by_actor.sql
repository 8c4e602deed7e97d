-- no-transaction
-- The audit log's actor_id filter (GET /audit-log, GET /audit-log/export). Like the action and
-- resource_type indexes (0002), it leads with the tenant and the filtered column and ends with the
-- list's keyset, so "this actor's entries, newest first" (or oldest first, read backwards) and a
-- from/to window on created_at are one index range read in order. One index per filter, none per
-- combination: docs/identity.md. CONCURRENTLY: the audit consumer keeps inserting while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_actor ON audit_log (tenant_id, actor_id, created_at DESC, id DESC);
