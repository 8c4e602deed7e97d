-- A step's insert may bring its event id, taken by the same statement's UPDATE of the run's row
-- (a provider call's step writes the run's cost and output there anyway): the trigger then leaves
-- it alone, and the run's row is written once for the step instead of twice. A step inserted
-- without one (the tool call's, and the previous release's during an upgrade) is numbered here,
-- under the run's row lock, as before.
CREATE OR REPLACE FUNCTION agent_run_steps_number() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.event_id IS NULL THEN
    UPDATE agent_runs r SET event_seq = agent_run_next_event(r) WHERE r.id = NEW.run_id
    RETURNING r.event_seq INTO NEW.event_id;
  END IF;
  RETURN NEW;
END
$$;
