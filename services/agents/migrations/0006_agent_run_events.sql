-- A run's events for its live view (GET …/runs/{id}/events): its steps and its status changes,
-- numbered by one sequence per run, so one Last-Event-ID resumes both kinds without loss or
-- repeats. Numbered by triggers, so every statement that writes a step or changes a status (and
-- the previous release's, during an upgrade) takes part without naming the sequence.
--
-- The number is taken under the run's row lock (an UPDATE of agent_runs) and commits with the
-- event: a reader that sees event_seq = n sees every event up to n, in order.
--
-- Runs from before this file (event_seq NULL) keep their steps as they are: a step without
-- event_id is number step_index + 1, the run's status then is number (its steps) + 1 (shown from
-- the run itself until it changes), and the run's next event takes the number after that.

-- The last number given to one of the run's events (internal).
ALTER TABLE agent_runs ADD COLUMN event_seq bigint;
-- The step's number in its run's events (internal).
ALTER TABLE agent_run_steps ADD COLUMN event_id bigint;

-- One row per status change: the run as it was just after the change (without its input, which
-- never changes: the reader takes it from the run).
CREATE TABLE agent_run_status_events (
  run_id    uuid NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
  event_id  bigint NOT NULL,
  tenant_id uuid NOT NULL,
  status    text NOT NULL,
  run       jsonb NOT NULL,
  PRIMARY KEY (run_id, event_id)
);

-- The number after a run's last one: a run from before this file continues after its steps and
-- the number of its status then.
CREATE FUNCTION agent_run_next_event(run agent_runs) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT coalesce(run.event_seq, (SELECT count(*) FROM agent_run_steps s WHERE s.run_id = run.id) + 1) + 1
$$;

CREATE FUNCTION agent_runs_number_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.event_seq := 1;
  ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
    NEW.event_seq := agent_run_next_event(OLD);
  END IF;
  RETURN NEW;
END
$$;

CREATE FUNCTION agent_runs_record_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO agent_run_status_events (run_id, event_id, tenant_id, status, run)
  VALUES (NEW.id, NEW.event_seq, NEW.tenant_id, NEW.status, to_jsonb(NEW) - 'input');
  RETURN NULL;
END
$$;

CREATE FUNCTION agent_run_steps_number() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE agent_runs r SET event_seq = agent_run_next_event(r) WHERE r.id = NEW.run_id
  RETURNING r.event_seq INTO NEW.event_id;
  RETURN NEW;
END
$$;

CREATE TRIGGER agent_runs_number_status BEFORE INSERT OR UPDATE OF status ON agent_runs
  FOR EACH ROW EXECUTE FUNCTION agent_runs_number_status();
CREATE TRIGGER agent_runs_record_created AFTER INSERT ON agent_runs
  FOR EACH ROW EXECUTE FUNCTION agent_runs_record_status();
CREATE TRIGGER agent_runs_record_status AFTER UPDATE OF status ON agent_runs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION agent_runs_record_status();
CREATE TRIGGER agent_run_steps_number BEFORE INSERT ON agent_run_steps
  FOR EACH ROW EXECUTE FUNCTION agent_run_steps_number();
