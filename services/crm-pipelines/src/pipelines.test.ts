import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { CreatePipelineRequest } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { LOST, OPEN, S, SALES_STAGES, WON, failure, startCrm, tenant } from './test-support.js';

describe('pipelines and stages over gRPC', () => {
  let crm: Awaited<ReturnType<typeof startCrm>>;
  before(async () => {
    crm = await startCrm();
  });
  after(() => crm.stop());

  const create = (t: ReturnType<typeof tenant>, body: Partial<CreatePipelineRequest> = {}) =>
    crm.client.call(S.createPipeline, { name: 'Sales', stages: SALES_STAGES, ...body }, t.call);

  it('creates a pipeline with its stages in display order, USD by default, the first one default', async () => {
    const t = tenant();
    const p = await crm.client.call(
      S.createPipeline,
      {
        name: '  New business ',
        description: 'Inbound',
        stages: [
          { name: 'Won', stage_type: WON, display_order: 30 },
          { name: 'Lead', stage_type: OPEN, default_confidence: 0.25, display_order: 10 },
          { name: 'Lost', stage_type: LOST, display_order: 40 },
          { name: 'Demo', stage_type: OPEN, display_order: 20, metadata: { color: 'blue' } },
        ],
      },
      t.call,
    );
    assert.equal(p.name, 'New business');
    assert.equal(p.currency, 'USD');
    assert.equal(p.is_default, true);
    assert.equal(p.display_order, 1);
    assert.equal(p.tenant_id, t.id);
    assert.deepEqual(
      p.stages.map((s) => [s.name, s.display_order, s.stage_type]),
      [
        ['Lead', 1, OPEN],
        ['Demo', 2, OPEN],
        ['Won', 3, WON],
        ['Lost', 4, LOST],
      ],
    );
    assert.equal(p.stages[0]!.default_confidence, 0.25);
    assert.equal(p.stages[1]!.default_confidence, undefined);
    assert.deepEqual(p.stages[1]!.metadata, { color: 'blue' });
    const got = await crm.client.call(S.getPipeline, { id: p.id }, t.call);
    assert.deepEqual(
      got.stages.map((s) => s.id),
      p.stages.map((s) => s.id),
    );
    const { rows } = await crm.db.query('SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq', [t.id]);
    assert.deepEqual(
      rows.map((r) => r.event_type),
      ['pipeline.created'],
    );
  });

  it('keeps exactly one default: a new default unsets the old, and the default cannot be unset', async () => {
    const t = tenant();
    const a = await create(t, { name: 'A' });
    const b = await create(t, { name: 'B', is_default: false });
    assert.equal(b.is_default, false);
    assert.equal(b.display_order, 2);
    const c = await create(t, { name: 'C', is_default: true, currency: 'eur' });
    assert.equal(c.is_default, true);
    assert.equal(c.currency, 'EUR');
    assert.equal((await crm.client.call(S.getPipeline, { id: a.id }, t.call)).is_default, false);
    const patched = await crm.client.call(S.updatePipeline, { id: b.id, is_default: true }, t.call);
    assert.equal(patched.is_default, true);
    const defaults = await crm.db.query(
      'SELECT id FROM pipelines WHERE tenant_id = $1 AND is_default AND deleted_at IS NULL',
      [t.id],
    );
    assert.deepEqual(
      defaults.rows.map((r) => r.id),
      [b.id],
    );
    const err = await failure(crm.client.call(S.updatePipeline, { id: b.id, is_default: false }, t.call));
    assert.equal(err.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(err.reason, 'DEFAULT_PIPELINE_REQUIRED');
  });

  it('keeps one default under 10 parallel creates that all ask for it', async () => {
    const t = tenant();
    await create(t, { name: 'first' });
    const made = await Promise.all(
      Array.from({ length: 10 }, (_, i) => create(t, { name: `p${i}`, is_default: true })),
    );
    const defaults = await crm.db.query(
      'SELECT id FROM pipelines WHERE tenant_id = $1 AND is_default AND deleted_at IS NULL',
      [t.id],
    );
    assert.equal(defaults.rows.length, 1);
    const orders = await crm.db.query(
      'SELECT display_order FROM pipelines WHERE tenant_id = $1 ORDER BY display_order',
      [t.id],
    );
    assert.deepEqual(
      orders.rows.map((r) => r.display_order),
      Array.from({ length: 11 }, (_, i) => i + 1),
    );
    assert.ok(made.some((p) => p.id === defaults.rows[0].id));
  });

  it('lists newest first with a cursor, patches fields and order, and soft-deletes (promoting a new default)', async () => {
    const t = tenant();
    const a = await create(t, { name: 'A' });
    const b = await create(t, { name: 'B' });
    const c = await create(t, { name: 'C' });
    const page1 = await crm.client.call(S.listPipelines, { limit: 2 }, t.call);
    assert.deepEqual(
      page1.data.map((p) => p.name),
      ['C', 'B'],
    );
    assert.equal(page1.has_more, true);
    assert.equal(page1.data[0]!.stages.length, 5);
    const page2 = await crm.client.call(S.listPipelines, { limit: 2, cursor: page1.next_cursor! }, t.call);
    assert.deepEqual(
      page2.data.map((p) => p.name),
      ['A'],
    );
    assert.equal(page2.has_more, false);

    const moved = await crm.client.call(
      S.updatePipeline,
      { id: c.id, display_order: 1, name: 'C2', description: 'x', metadata: { k: 1 } },
      t.call,
    );
    assert.equal(moved.display_order, 1);
    assert.equal(moved.name, 'C2');
    assert.equal(moved.description, 'x');
    assert.deepEqual(moved.metadata, { k: 1 });
    const orders = await crm.db.query(
      'SELECT name, display_order FROM pipelines WHERE tenant_id = $1 ORDER BY display_order',
      [t.id],
    );
    assert.deepEqual(
      orders.rows.map((r) => r.name),
      ['C2', 'A', 'B'],
    );
    const cleared = await crm.client.call(S.updatePipeline, { id: c.id, description: '' }, t.call);
    assert.equal(cleared.description, undefined);

    await crm.client.call(S.deletePipeline, { id: a.id }, t.call);
    assert.equal((await failure(crm.client.call(S.getPipeline, { id: a.id }, t.call))).code, grpc.status.NOT_FOUND);
    assert.equal((await failure(crm.client.call(S.deletePipeline, { id: a.id }, t.call))).code, grpc.status.NOT_FOUND);
    const left = await crm.client.call(S.listPipelines, {}, t.call);
    assert.deepEqual(left.data.map((p) => p.id).sort(), [b.id, c.id].sort());
    // A was the default: the first remaining in display order (C2) took over.
    assert.equal((await crm.client.call(S.getPipeline, { id: c.id }, t.call)).is_default, true);
    assert.deepEqual((await crm.client.call(S.getPipeline, { id: b.id }, t.call)).display_order, 2);
  });

  it('adds, renames, retypes, reorders and deletes stages, keeping the order dense', async () => {
    const t = tenant();
    const p = await create(t);
    const added = await crm.client.call(
      S.createPipelineStage,
      { pipeline_id: p.id, name: 'Negotiation', stage_type: OPEN, default_confidence: 0.7, display_order: 4 },
      t.call,
    );
    assert.equal(added.display_order, 4);
    assert.equal(added.default_confidence, 0.7);
    const appended = await crm.client.call(
      S.createPipelineStage,
      { pipeline_id: p.id, name: 'On hold', stage_type: OPEN },
      t.call,
    );
    assert.equal(appended.display_order, 7);
    const names = (await crm.client.call(S.getPipeline, { id: p.id }, t.call)).stages.map((s) => s.name);
    assert.deepEqual(names, ['Lead', 'Qualified', 'Proposal', 'Negotiation', 'Won', 'Lost', 'On hold']);

    const renamed = await crm.client.call(
      S.updatePipelineStage,
      {
        pipeline_id: p.id,
        stage_id: appended.id,
        name: 'Parked',
        stage_type: LOST,
        default_confidence: 0,
        display_order: 1,
      },
      t.call,
    );
    assert.deepEqual(
      [renamed.name, renamed.stage_type, renamed.default_confidence, renamed.display_order],
      ['Parked', LOST, 0, 1],
    );
    const got = await crm.client.call(S.getPipeline, { id: p.id }, t.call);
    assert.deepEqual(
      got.stages.map((s) => s.name),
      ['Parked', 'Lead', 'Qualified', 'Proposal', 'Negotiation', 'Won', 'Lost'],
    );
    assert.deepEqual(
      got.stages.map((s) => s.display_order),
      [1, 2, 3, 4, 5, 6, 7],
    );

    await crm.client.call(S.deletePipelineStage, { pipeline_id: p.id, stage_id: added.id }, t.call);
    const after = await crm.client.call(S.getPipeline, { id: p.id }, t.call);
    assert.deepEqual(
      after.stages.map((s) => [s.name, s.display_order]),
      [
        ['Parked', 1],
        ['Lead', 2],
        ['Qualified', 3],
        ['Proposal', 4],
        ['Won', 5],
        ['Lost', 6],
      ],
    );
    const gone = await failure(
      crm.client.call(S.updatePipelineStage, { pipeline_id: p.id, stage_id: added.id, name: 'x' }, t.call),
    );
    assert.equal(gone.reason, 'PIPELINE_STAGE_NOT_FOUND');
    const { rows } = await crm.db.query(
      `SELECT event_type FROM outbox WHERE tenant_id = $1 AND event_type LIKE 'pipeline_stage.%' ORDER BY seq`,
      [t.id],
    );
    assert.deepEqual(
      rows.map((r) => r.event_type),
      ['pipeline_stage.created', 'pipeline_stage.created', 'pipeline_stage.updated', 'pipeline_stage.deleted'],
    );
  });

  it('refuses to delete a stage that holds deals, unless told where to move them (each move in the history)', async () => {
    const t = tenant();
    const p = await create(t);
    const [lead, qualified] = p.stages;
    const d1 = await crm.client.call(S.createDeal, { title: 'one', amount: 10 }, t.call);
    const d2 = await crm.client.call(S.createDeal, { title: 'two', amount: 20 }, t.call);
    assert.equal(d1.stage_id, lead!.id);
    const err = await failure(
      crm.client.call(S.deletePipelineStage, { pipeline_id: p.id, stage_id: lead!.id }, t.call),
    );
    assert.equal(err.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(err.reason, 'STAGE_HAS_DEALS');
    assert.equal(err.httpStatus, 409);
    const self = await failure(
      crm.client.call(
        S.deletePipelineStage,
        { pipeline_id: p.id, stage_id: lead!.id, move_deals_to_stage_id: lead!.id },
        t.call,
      ),
    );
    assert.equal(self.code, grpc.status.INVALID_ARGUMENT);
    const other = await create(t, { name: 'Other' });
    const foreign = await failure(
      crm.client.call(
        S.deletePipelineStage,
        { pipeline_id: p.id, stage_id: lead!.id, move_deals_to_stage_id: other.stages[0]!.id },
        t.call,
      ),
    );
    assert.equal(foreign.fieldViolations[0]?.field, 'move_deals_to_stage_id');

    await crm.client.call(
      S.deletePipelineStage,
      { pipeline_id: p.id, stage_id: lead!.id, move_deals_to_stage_id: qualified!.id },
      t.call,
    );
    for (const d of [d1, d2]) {
      const now = await crm.client.call(S.getDeal, { id: d.id }, t.call);
      assert.equal(now.stage_id, qualified!.id);
      const h = await crm.client.call(S.listDealHistory, { id: d.id }, t.call);
      assert.deepEqual(
        h.data.map((e) => [e.from_stage_name, e.to_stage_name]),
        [
          [undefined, 'Lead'],
          ['Lead', 'Qualified'],
        ],
      );
    }
    const events = await crm.db.query(
      `SELECT count(*)::int AS n FROM outbox WHERE tenant_id = $1 AND event_type = 'deal.stage_changed'`,
      [t.id],
    );
    assert.equal(events.rows[0].n, 2);
  });

  it('refuses to delete a pipeline with deals, or to change its currency while it has some', async () => {
    const t = tenant();
    const p = await create(t);
    const d = await crm.client.call(S.createDeal, { title: 'x', pipeline_id: p.id }, t.call);
    assert.equal((await failure(crm.client.call(S.deletePipeline, { id: p.id }, t.call))).reason, 'PIPELINE_HAS_DEALS');
    assert.equal(
      (await failure(crm.client.call(S.updatePipeline, { id: p.id, currency: 'EUR' }, t.call))).reason,
      'PIPELINE_HAS_DEALS',
    );
    assert.equal(
      (await crm.client.call(S.updatePipeline, { id: p.id, currency: 'USD' }, t.call)).currency,
      'USD',
      'the same currency is no change',
    );
    await crm.client.call(S.deleteDeal, { id: d.id }, t.call);
    assert.equal((await crm.client.call(S.updatePipeline, { id: p.id, currency: 'EUR' }, t.call)).currency, 'EUR');
    await crm.client.call(S.deletePipeline, { id: p.id }, t.call);
    const { rows } = await crm.db.query(
      'SELECT count(*)::int AS n FROM pipeline_stages WHERE pipeline_id = $1 AND deleted_at IS NULL',
      [p.id],
    );
    assert.equal(rows[0].n, 0, 'its stages are deleted with it');
  });

  it('rejects bad input field by field', async () => {
    const t = tenant();
    const err = await failure(
      crm.client.call(
        S.createPipeline,
        {
          name: '',
          currency: 'EURO',
          metadata: {},
          stages: [
            { name: 'a', stage_type: 99 as never },
            { name: '', stage_type: 0, default_confidence: 1.5 },
            { name: 'c', stage_type: OPEN, default_confidence: 0.12345 },
          ],
        },
        t.call,
      ),
    );
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(err.fieldViolations.map((v) => v.field).sort(), [
      'currency',
      'name',
      'stages[0].stage_type',
      'stages[1].default_confidence',
      'stages[1].name',
      'stages[1].stage_type',
      'stages[2].default_confidence',
    ]);
    const order = await failure(
      crm.client.call(
        S.createPipeline,
        {
          name: 'x',
          stages: [
            { name: 'a', stage_type: OPEN, display_order: 1 },
            { name: 'b', stage_type: OPEN },
          ],
        },
        t.call,
      ),
    );
    assert.equal(order.fieldViolations[0]?.field, 'stages');
    const p = await create(t);
    const stageErr = await failure(
      crm.client.call(
        S.updatePipelineStage,
        { pipeline_id: p.id, stage_id: p.stages[0]!.id, default_confidence: -0.5, display_order: 0 },
        t.call,
      ),
    );
    assert.deepEqual(stageErr.fieldViolations.map((v) => v.field).sort(), ['default_confidence', 'display_order']);
    assert.equal(
      (await failure(crm.client.call(S.getPipeline, { id: 'nope' }, t.call))).fieldViolations[0]?.field,
      'id',
    );
  });

  it('keeps tenants apart on every by-id rpc', async () => {
    const owner = tenant();
    const other = tenant();
    const p = await create(owner);
    const s = p.stages[0]!;
    const calls = [
      () => crm.client.call(S.getPipeline, { id: p.id }, other.call),
      () => crm.client.call(S.updatePipeline, { id: p.id, name: 'mine' }, other.call),
      () => crm.client.call(S.deletePipeline, { id: p.id }, other.call),
      () => crm.client.call(S.getPipelineSummary, { id: p.id }, other.call),
      () => crm.client.call(S.createPipelineStage, { pipeline_id: p.id, name: 'x', stage_type: OPEN }, other.call),
      () => crm.client.call(S.updatePipelineStage, { pipeline_id: p.id, stage_id: s.id, name: 'x' }, other.call),
      () => crm.client.call(S.deletePipelineStage, { pipeline_id: p.id, stage_id: s.id }, other.call),
    ];
    for (const c of calls) assert.equal((await failure(c())).code, grpc.status.NOT_FOUND);
    assert.deepEqual((await crm.client.call(S.listPipelines, {}, other.call)).data, []);
    const still = await crm.client.call(S.getPipeline, { id: p.id }, owner.call);
    assert.equal(still.name, 'Sales');
    assert.equal(still.stages.length, 5);
    // A stage of another tenant's pipeline is not a stage of this one either.
    const mine = await create(other);
    assert.equal(
      (
        await failure(
          crm.client.call(S.updatePipelineStage, { pipeline_id: mine.id, stage_id: s.id, name: 'x' }, other.call),
        )
      ).code,
      grpc.status.NOT_FOUND,
    );
  });
});
