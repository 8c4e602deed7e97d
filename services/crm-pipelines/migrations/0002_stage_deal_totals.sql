-- The pipeline summary from per-stage aggregates instead of an aggregation over every deal: the
-- summary then reads (stages × slots) rows whatever the number of deals (docs/crm-pipelines.md).
-- Triggers keep the aggregates in the transaction of every deal write (insert, update, soft or hard
-- delete, and bulk statements), so no write path can forget them and they are exact: NUMERIC sums
-- of the deals' own NUMERIC columns, rounded only when the summary is read.
--
-- Each stage's sums are spread over 32 slot rows, and a transaction adds its changes to the slot
-- its transaction id picks: concurrent deal writes in one stage then rarely wait for the same row
-- lock (one row per stage would serialise every deal move into or out of a stage until commit).
-- The summary adds the slots up.
CREATE TABLE stage_deal_totals (
  stage_id    uuid NOT NULL,
  slot        smallint NOT NULL,
  tenant_id   uuid NOT NULL,
  pipeline_id uuid NOT NULL,
  -- Live deals (deleted_at IS NULL) of the stage counted in this slot, and their sums:
  deal_count  bigint NOT NULL,
  total       numeric NOT NULL, -- Σ amount
  with_own    numeric NOT NULL, -- Σ amount × confidence over deals with a confidence
  without_own numeric NOT NULL, -- Σ amount over deals without one (the stage's default applies)
  PRIMARY KEY (stage_id, slot)
);
CREATE INDEX stage_deal_totals_pipeline ON stage_deal_totals (tenant_id, pipeline_id);

-- One stage's change by a statement: a composite, so inserted and removed rows add up in one upsert.
CREATE TYPE stage_deal_delta AS (tenant_id uuid, pipeline_id uuid, stage_id uuid, deal_count bigint, total numeric, with_own numeric, without_own numeric);

CREATE FUNCTION stage_deal_totals_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  deltas stage_deal_delta[] := '{}';
BEGIN
  IF TG_OP <> 'DELETE' THEN
    deltas := deltas || ARRAY(
      SELECT ROW(tenant_id, pipeline_id, stage_id, count(*), sum(amount), coalesce(sum(amount * confidence), 0),
                 coalesce(sum(amount) FILTER (WHERE confidence IS NULL), 0))::stage_deal_delta
        FROM new_deals WHERE deleted_at IS NULL GROUP BY tenant_id, pipeline_id, stage_id);
  END IF;
  IF TG_OP <> 'INSERT' THEN
    deltas := deltas || ARRAY(
      SELECT ROW(tenant_id, pipeline_id, stage_id, -count(*), -sum(amount), -coalesce(sum(amount * confidence), 0),
                 -coalesce(sum(amount) FILTER (WHERE confidence IS NULL), 0))::stage_deal_delta
        FROM old_deals WHERE deleted_at IS NULL GROUP BY tenant_id, pipeline_id, stage_id);
  END IF;
  -- Stages in id order, so two transactions that touch the same slots lock them in the same order;
  -- an update that changes none of the summed columns (a title) nets to zero and locks nothing.
  INSERT INTO stage_deal_totals AS t (stage_id, slot, tenant_id, pipeline_id, deal_count, total, with_own, without_own)
  SELECT d.stage_id, (txid_current() % 32)::smallint, d.tenant_id, d.pipeline_id,
         sum(d.deal_count), sum(d.total), sum(d.with_own), sum(d.without_own)
    FROM unnest(deltas) AS d
   GROUP BY d.stage_id, d.tenant_id, d.pipeline_id
  HAVING sum(d.deal_count) <> 0 OR sum(d.total) <> 0 OR sum(d.with_own) <> 0 OR sum(d.without_own) <> 0
   ORDER BY d.stage_id
  ON CONFLICT (stage_id, slot) DO UPDATE SET
    deal_count = t.deal_count + excluded.deal_count,
    total = t.total + excluded.total,
    with_own = t.with_own + excluded.with_own,
    without_own = t.without_own + excluded.without_own;
  RETURN NULL;
END
$$;

-- Transition tables allow one event per trigger: three triggers, one function.
CREATE TRIGGER deals_totals_insert AFTER INSERT ON deals REFERENCING NEW TABLE AS new_deals
  FOR EACH STATEMENT EXECUTE FUNCTION stage_deal_totals_apply();
CREATE TRIGGER deals_totals_update AFTER UPDATE ON deals REFERENCING OLD TABLE AS old_deals NEW TABLE AS new_deals
  FOR EACH STATEMENT EXECUTE FUNCTION stage_deal_totals_apply();
CREATE TRIGGER deals_totals_delete AFTER DELETE ON deals REFERENCING OLD TABLE AS old_deals
  FOR EACH STATEMENT EXECUTE FUNCTION stage_deal_totals_apply();

-- Recomputes the aggregates from the deals, in slot 0 (this migration's backfill; an operator's
-- repair; benchmarks that write deals with the triggers off). Locks out deal writes while it runs.
CREATE FUNCTION stage_deal_totals_rebuild() RETURNS void LANGUAGE sql AS $$
  LOCK TABLE deals IN SHARE MODE;
  DELETE FROM stage_deal_totals;
  INSERT INTO stage_deal_totals (stage_id, slot, tenant_id, pipeline_id, deal_count, total, with_own, without_own)
  SELECT stage_id, 0, tenant_id, pipeline_id, count(*), sum(amount), coalesce(sum(amount * confidence), 0),
         coalesce(sum(amount) FILTER (WHERE confidence IS NULL), 0)
    FROM deals WHERE deleted_at IS NULL GROUP BY stage_id, tenant_id, pipeline_id;
$$;

SELECT stage_deal_totals_rebuild();

-- The summary no longer aggregates the deals: its index is only a cost on every deal write now.
DROP INDEX deals_summary;
