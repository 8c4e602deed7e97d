-- no-transaction
-- Queued jobs are found only through jobs_ready_by_group_and_key (0004). With jobs_ready beside
-- it, the planner picked jobs_ready for the claim's walk over (group, key) pairs whenever the
-- statistics said few jobs were queued (a queue analyzed while drained, then a burst): each step of
-- the walk then read every queued job, 16 ms per claim at 6,000 queued deliveries and growing with
-- the backlog (docs/benchmarks.md, "Webhook deliveries"). Dropping it leaves one plan for each
-- step. Queries of the previous release stay correct (they only lose an index; their claims get
-- the index they were written for). CONCURRENTLY: enqueues and claims go on meanwhile.
DROP INDEX CONCURRENTLY IF EXISTS jobs_ready;
