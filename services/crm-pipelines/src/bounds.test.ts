/**
 * A deal's history comes back as one array (no pages) and grows with every stage move: what one
 * request returns is bounded, so no deal's history grows past what the API can send.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { S, SALES_STAGES, startCrm, tenant } from './test-support.js';

describe('bounds of the bare-array lists', () => {
  let crm: Awaited<ReturnType<typeof startCrm>>;
  before(async () => {
    crm = await startCrm();
  });
  after(() => crm.stop());

  it("answers a deal's last 1,000 stage changes, oldest first, however many it had", async () => {
    const t = tenant();
    const p = await crm.client.call(S.createPipeline, { name: 'Busy', stages: SALES_STAGES }, t.call);
    const d = await crm.client.call(S.createDeal, { title: 'Moved a lot', pipeline_id: p.id }, t.call);
    const [lead, qualified] = [p.stages[0]!, p.stages[1]!];
    // 1,500 moves back and forth after the first row (seq 1), as a script moving the deal all day would leave.
    await crm.db.query(
      `INSERT INTO deal_stage_history (id, tenant_id, deal_id, seq, from_stage_id, from_stage_name, to_stage_id, to_stage_name)
       SELECT gen_random_uuid(), $1, $2, i,
              CASE WHEN i % 2 = 0 THEN $3::uuid ELSE $4::uuid END, CASE WHEN i % 2 = 0 THEN 'Lead' ELSE 'Qualified' END,
              CASE WHEN i % 2 = 0 THEN $4::uuid ELSE $3::uuid END, CASE WHEN i % 2 = 0 THEN 'Qualified' ELSE 'Lead' END
         FROM generate_series(2, 1501) AS i`,
      [t.id, d.id, lead.id, qualified.id],
    );
    const moved = await crm.client.call(S.updateDeal, { id: d.id, stage_id: p.stages[2]!.id }, t.call);
    assert.equal(moved.stage_id, p.stages[2]!.id);
    const history = (await crm.client.call(S.listDealHistory, { id: d.id }, t.call)).data;
    assert.equal(history.length, 1_000);
    assert.equal(history.at(-1)!.to_stage_name, 'Proposal', 'the newest change is there, last');
    const { rows } = await crm.db.query<{ id: string }>(
      'SELECT id FROM deal_stage_history WHERE deal_id = $1 ORDER BY seq DESC LIMIT 1000',
      [d.id],
    );
    assert.deepEqual(
      history.map((h) => h.id),
      rows.map((r) => r.id).reverse(),
      'the last 1,000, in order',
    );
  });
});
