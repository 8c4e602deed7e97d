import { preparedStatement, type Queryable } from '@workauto/db';
import type { StageType } from './stages.js';

export interface StageSummaryRow {
  stage_id: string;
  stage_name: string;
  stage_type: StageType;
  deal_count: number;
  /** NUMERIC text, rounded to the currency's minor unit. */
  total_value: string;
  weighted_value: string;
  total_deals: number;
  pipeline_total_value: string;
  pipeline_weighted_value: string;
}

/**
 * The pipeline summary as one statement in SQL over NUMERIC (never in memory, never floats), from
 * the per-stage aggregates the deal writes keep (stage_deal_totals, maintained by triggers in each
 * deal write's transaction: migrations/0002): it reads stages × slots rows, whatever the number of
 * deals. Since a stage's default confidence is one value per stage, the open stages' weighted value
 * is Σ amount×confidence over deals that have one plus default × Σ amount over those that do not
 * (0 when the stage has no default); won stages weigh 1, lost 0. Every live stage appears in display
 * order (LEFT JOIN: empty ones with zeros). Stage and pipeline values are rounded to `digits`
 * decimals only at the end (half away from zero); the totals are rounded from the exact sums, not
 * summed from rounded stage values. Prepared once per connection: planning the CTEs and the window
 * took more than half of its time (docs/benchmarks.md, "The API mix").
 */
export async function pipelineSummary(
  db: Queryable,
  tenantId: string,
  pipelineId: string,
  digits: number,
): Promise<StageSummaryRow[]> {
  const { rows } = await db.query<StageSummaryRow>(SUMMARY([tenantId, pipelineId, digits]));
  return rows;
}

const SUMMARY = preparedStatement<[string, string, number]>(
  'crm_pipeline_summary',
  `WITH per_stage AS MATERIALIZED (
       SELECT t.stage_id,
              sum(t.deal_count) AS n,
              sum(t.total) AS total,
              sum(t.with_own) AS with_own,
              sum(t.without_own) AS without_own
         FROM stage_deal_totals t
        WHERE t.tenant_id = $1 AND t.pipeline_id = $2
        GROUP BY t.stage_id
     ), stages AS (
       SELECT s.id, s.name, s.stage_type, s.display_order,
              coalesce(a.n, 0) AS n,
              coalesce(a.total, 0) AS total,
              CASE s.stage_type
                WHEN 'won'  THEN coalesce(a.total, 0)
                WHEN 'lost' THEN 0
                ELSE coalesce(a.with_own, 0) + coalesce(s.default_confidence, 0) * coalesce(a.without_own, 0)
              END AS weighted
         FROM pipeline_stages s
         LEFT JOIN per_stage a ON a.stage_id = s.id
        WHERE s.tenant_id = $1 AND s.pipeline_id = $2 AND s.deleted_at IS NULL
     )
     SELECT id AS stage_id, name AS stage_name, stage_type,
            n::int AS deal_count,
            round(total, $3)::text AS total_value,
            round(weighted, $3)::text AS weighted_value,
            (sum(n) OVER ())::int AS total_deals,
            round(sum(total) OVER (), $3)::text AS pipeline_total_value,
            round(sum(weighted) OVER (), $3)::text AS pipeline_weighted_value
       FROM stages
      ORDER BY display_order, id`,
);
