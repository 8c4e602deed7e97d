-- The steps of a run (a model call, a tool call), each written when it ends by the worker holding
-- the run. Text fields are cut (result 4 KiB) and never hold a provider key.
CREATE TABLE agent_run_steps (
  tenant_id        uuid NOT NULL,
  run_id           uuid NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
  step_index       integer NOT NULL CHECK (step_index >= 0),
  type             text NOT NULL CHECK (type IN ('model_call', 'tool_call')),
  started_at       timestamptz NOT NULL,
  ended_at         timestamptz NOT NULL,
  tool_name        text,
  arguments        jsonb,
  result           text,
  is_error         boolean,
  input_tokens     bigint,
  output_tokens    bigint,
  -- Exact cost in millionths of a cent (as agent_runs.cost_micro_cents).
  cost_micro_cents bigint,
  PRIMARY KEY (run_id, step_index)
);
