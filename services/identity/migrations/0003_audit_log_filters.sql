-- The audit log's actor_id and resource_id filters (GET /audit-log, GET /audit-log/export). Like the
-- action and resource_type indexes, each one leads with the tenant and the filtered column and ends
-- with the list's keyset, so "this actor's entries, newest first" and a from/to window on top of it
-- are one index range read in order. One index per filter, none per combination: the planner takes
-- the most selective one and checks the other filters on the rows it reads (docs/identity.md).
-- IF NOT EXISTS: an operator with a large log may build them beforehand with CREATE INDEX
-- CONCURRENTLY (same names and definitions), which this migration's transaction cannot do; a plain
-- CREATE INDEX blocks the audit consumer's inserts while it runs (events wait in Kafka, none is lost).
CREATE INDEX IF NOT EXISTS audit_log_by_actor ON audit_log (tenant_id, actor_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS audit_log_by_resource ON audit_log (tenant_id, resource_id, created_at DESC, id DESC);
