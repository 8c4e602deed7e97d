-- The access levels of the member who started a run (signed by the gateway): a run offers only the
-- tools its starter may use (app tools need write on apps). NULL: not restricted (scheduled runs,
-- which act under the config an agents admin set, and runs created before this column).
ALTER TABLE agent_runs ADD COLUMN starter_access jsonb;
