import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { eventually } from '@workauto/testing';
import { DealStatus } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { findDeal } from './repo/deals.js';
import { LOST, OPEN, S, SALES_STAGES, WON, failure, startCrm, tenant } from './test-support.js';

describe('deals over gRPC', () => {
  let crm: Awaited<ReturnType<typeof startCrm>>;
  before(async () => {
    crm = await startCrm();
  });
  after(() => crm.stop());

  const pipeline = (t: ReturnType<typeof tenant>, currency?: string) =>
    crm.client.call(
      S.createPipeline,
      { name: 'Sales', stages: SALES_STAGES, ...(currency ? { currency } : {}) },
      t.call,
    );

  it('creates a deal in the default pipeline’s first open stage, with its first history row', async () => {
    const t = tenant();
    // The first stage in display order is not open: the deal goes to the first open one.
    const p = await crm.client.call(
      S.createPipeline,
      {
        name: 'P',
        stages: [
          { name: 'Lost early', stage_type: LOST },
          { name: 'Intro', stage_type: OPEN },
          { name: 'Won', stage_type: WON },
        ],
      },
      t.call,
    );
    const owner = randomUUID();
    const d = await crm.client.call(
      S.createDeal,
      {
        title: ' Big one ',
        amount: 1234.56,
        confidence: 0.4,
        owner_id: owner,
        expected_close_date: '2026-12-31',
        metadata: { src: 'web' },
      },
      t.call,
    );
    assert.equal(d.title, 'Big one');
    assert.equal(d.pipeline_id, p.id);
    assert.equal(d.stage_id, p.stages[1]!.id);
    assert.equal(d.status, DealStatus.DEAL_STATUS_OPEN);
    assert.equal(d.amount, 1234.56);
    assert.equal(d.currency, 'USD');
    assert.equal(d.confidence, 0.4);
    assert.equal(d.owner_id, owner);
    assert.equal(d.expected_close_date, '2026-12-31');
    assert.deepEqual(d.metadata, { src: 'web' });
    const { rows } = await crm.db.query(
      'SELECT amount::text AS amount, confidence::text AS confidence FROM deals WHERE id = $1',
      [d.id],
    );
    assert.deepEqual(rows[0], { amount: '1234.5600', confidence: '0.4000' }, 'stored as exact NUMERIC');
    const h = await crm.client.call(S.listDealHistory, { id: d.id }, t.call);
    assert.equal(h.data.length, 1);
    const first = h.data[0]!;
    assert.equal(first.from_stage_id, undefined);
    assert.equal(first.from_stage_name, undefined);
    assert.equal(first.to_stage_id, p.stages[1]!.id);
    assert.equal(first.to_stage_name, 'Intro');
    assert.equal(first.amount_at_change, 1234.56);
    assert.equal(first.confidence_at_change, 0.4);
    assert.equal(first.deal_id, d.id);
    assert.equal(first.tenant_id, t.id);
    assert.ok(first.changed_at instanceof Date);
    const minimal = await crm.client.call(S.createDeal, { title: 'no amount' }, t.call);
    assert.equal(minimal.amount, 0);
    assert.equal(minimal.confidence, undefined);
  });

  it('moves a deal between stages, deriving its status and writing each move, oldest first', async () => {
    const t = tenant();
    const p = await pipeline(t);
    const [lead, qualified, proposal, won] = p.stages;
    const d = await crm.client.call(S.createDeal, { title: 'd', amount: 100 }, t.call);
    await crm.client.call(S.updateDeal, { id: d.id, stage_id: qualified!.id, amount: 150.5 }, t.call);
    await crm.client.call(S.updateDeal, { id: d.id, stage_id: proposal!.id, confidence: 0.8 }, t.call);
    const done = await crm.client.call(S.updateDeal, { id: d.id, stage_id: won!.id }, t.call);
    assert.equal(done.status, DealStatus.DEAL_STATUS_WON);
    await crm.client.call(S.updateDeal, { id: d.id, stage_id: won!.id, title: 'renamed' }, t.call); // same stage: no history row
    const h = (await crm.client.call(S.listDealHistory, { id: d.id }, t.call)).data;
    assert.deepEqual(
      h.map((e) => [e.from_stage_name ?? null, e.to_stage_name, e.amount_at_change, e.confidence_at_change ?? null]),
      [
        [null, 'Lead', 100, null],
        ['Lead', 'Qualified', 150.5, null],
        ['Qualified', 'Proposal', 150.5, 0.8],
        ['Proposal', 'Won', 150.5, 0.8],
      ],
    );
    assert.deepEqual(
      h.map((e) => e.to_stage_id),
      [lead!.id, qualified!.id, proposal!.id, won!.id],
    );
    for (let i = 1; i < h.length; i++) assert.ok(h[i]!.changed_at!.getTime() >= h[i - 1]!.changed_at!.getTime());
    const { rows } = await crm.db.query('SELECT event_type FROM outbox WHERE resource_id = $1 ORDER BY seq', [d.id]);
    assert.deepEqual(
      rows.map((r) => r.event_type),
      [
        'deal.created',
        'deal.stage_changed',
        'deal.updated',
        'deal.stage_changed',
        'deal.updated',
        'deal.stage_changed',
        'deal.updated',
      ],
    );
  });

  it('moves a deal to another pipeline (its first open stage), taking that pipeline’s currency if its amount fits it', async () => {
    const t = tenant();
    const usd = await pipeline(t);
    const eur = await pipeline(t, 'EUR');
    const jpy = await pipeline(t, 'JPY');
    const d = await crm.client.call(S.createDeal, { title: 'd', pipeline_id: usd.id, amount: 10.5 }, t.call);
    const mismatch = await failure(
      crm.client.call(S.updateDeal, { id: d.id, pipeline_id: eur.id, currency: 'USD' }, t.call),
    );
    assert.deepEqual([mismatch.code, mismatch.fieldViolations[0]?.field], [grpc.status.INVALID_ARGUMENT, 'currency']);
    const moved = await crm.client.call(S.updateDeal, { id: d.id, pipeline_id: eur.id }, t.call);
    assert.deepEqual(
      [moved.pipeline_id, moved.stage_id, moved.currency, moved.amount],
      [eur.id, eur.stages[0]!.id, 'EUR', 10.5],
    );
    // 10.5 is no amount in yen: the move is refused, and the deal stays where it was.
    const yen = await failure(crm.client.call(S.updateDeal, { id: d.id, pipeline_id: jpy.id }, t.call));
    assert.deepEqual([yen.code, yen.fieldViolations[0]?.field], [grpc.status.INVALID_ARGUMENT, 'amount']);
    assert.match(yen.message, /JPY allows at most 0.*send an amount valid in JPY/);
    const toStage = await failure(crm.client.call(S.updateDeal, { id: d.id, stage_id: jpy.stages[1]!.id }, t.call));
    assert.equal(toStage.fieldViolations[0]?.field, 'amount');
    assert.deepEqual((await crm.client.call(S.getDeal, { id: d.id }, t.call)).currency, 'EUR');
    const inYen = await crm.client.call(S.updateDeal, { id: d.id, pipeline_id: jpy.id, amount: 1500 }, t.call);
    assert.deepEqual([inYen.pipeline_id, inYen.currency, inYen.amount], [jpy.id, 'JPY', 1500]);
    const { rows } = await crm.db.query('SELECT currency FROM deals WHERE id = $1', [d.id]);
    assert.equal(rows[0].currency, 'JPY');
    const wrongPair = await failure(
      crm.client.call(S.updateDeal, { id: d.id, pipeline_id: usd.id, stage_id: eur.stages[1]!.id }, t.call),
    );
    assert.equal(wrongPair.fieldViolations[0]?.field, 'stage_id');
  });

  it('enforces currency and minor-unit decimals on money', async () => {
    const t = tenant();
    const usd = await pipeline(t);
    const jpy = await pipeline(t, 'JPY');
    const cases: [Record<string, unknown>, string][] = [
      [{ currency: 'EUR' }, 'currency'],
      [{ currency: 'nope' }, 'currency'],
      [{ amount: 10.123 }, 'amount'],
      [{ amount: -5 }, 'amount'],
      [{ amount: 1e15 }, 'amount'],
      [{ confidence: 1.2 }, 'confidence'],
      [{ confidence: 0.55555 }, 'confidence'],
      [{ expected_close_date: '2026-02-30' }, 'expected_close_date'],
      [{ contact_id: randomUUID() }, 'contact_id'],
      [{ pipeline_id: randomUUID() }, 'pipeline_id'],
      [{ stage_id: randomUUID() }, 'stage_id'],
      [{ owner_id: 'bob' }, 'owner_id'],
    ];
    for (const [body, field] of cases) {
      const err = await failure(crm.client.call(S.createDeal, { title: 't', pipeline_id: usd.id, ...body }, t.call));
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(body));
      assert.equal(err.fieldViolations[0]?.field, field, JSON.stringify(body));
    }
    const yen = await failure(
      crm.client.call(S.createDeal, { title: 't', pipeline_id: jpy.id, amount: 100.5 }, t.call),
    );
    assert.match(yen.fieldViolations[0]!.description, /at most 0 decimals in JPY/);
    const ok = await crm.client.call(
      S.createDeal,
      { title: 't', pipeline_id: jpy.id, amount: 100, currency: 'jpy' },
      t.call,
    );
    assert.equal(ok.currency, 'JPY');
    const d = await crm.client.call(S.createDeal, { title: 't', pipeline_id: usd.id, amount: 0.1 }, t.call);
    assert.equal(
      (await failure(crm.client.call(S.updateDeal, { id: d.id, amount: 0.1 + 0.2 }, t.call))).fieldViolations[0]?.field,
      'amount',
    );
    assert.equal(
      (await failure(crm.client.call(S.updateDeal, { id: d.id, currency: 'GBP' }, t.call))).fieldViolations[0]?.field,
      'currency',
    );
    assert.equal((await crm.client.call(S.updateDeal, { id: d.id, amount: 0.3 }, t.call)).amount, 0.3);
  });

  it('needs a pipeline with an open stage', async () => {
    const t = tenant();
    assert.equal((await failure(crm.client.call(S.createDeal, { title: 't' }, t.call))).reason, 'NO_PIPELINE');
    await crm.client.call(
      S.createPipeline,
      { name: 'closed only', stages: [{ name: 'Won', stage_type: WON }] },
      t.call,
    );
    const err = await failure(crm.client.call(S.createDeal, { title: 't' }, t.call));
    assert.equal(err.reason, 'NO_OPEN_STAGE');
    assert.equal(err.httpStatus, 409);
  });

  it('lists with filters, patches and clears fields, and soft-deletes', async () => {
    const t = tenant();
    const p = await pipeline(t);
    const other = await pipeline(t);
    const contact = await crm.client.call(S.createContact, { name: 'Ann' }, t.call);
    const owner = randomUUID();
    const a = await crm.client.call(S.createDeal, { title: 'a', owner_id: owner, contact_id: contact.id }, t.call);
    const b = await crm.client.call(S.createDeal, { title: 'b', stage_id: p.stages[3]!.id }, t.call);
    const c = await crm.client.call(S.createDeal, { title: 'c', pipeline_id: other.id, confidence: 0.5 }, t.call);
    const list = async (f: Record<string, unknown>) =>
      (await crm.client.call(S.listDeals, f as never, t.call)).data.map((d) => d.title);
    assert.deepEqual(await list({}), ['c', 'b', 'a']);
    assert.deepEqual(await list({ pipeline_id: p.id }), ['b', 'a']);
    assert.deepEqual(await list({ stage_id: p.stages[0]!.id }), ['a']);
    assert.deepEqual(await list({ status: DealStatus.DEAL_STATUS_WON }), ['b']);
    assert.deepEqual(await list({ status: DealStatus.DEAL_STATUS_OPEN }), ['c', 'a']);
    assert.deepEqual(await list({ owner_id: owner }), ['a']);
    assert.deepEqual(await list({ contact_id: contact.id }), ['a']);
    const page = await crm.client.call(S.listDeals, { limit: 2 }, t.call);
    assert.equal(page.has_more, true);
    assert.deepEqual(
      (await crm.client.call(S.listDeals, { limit: 2, cursor: page.next_cursor! }, t.call)).data.map((d) => d.title),
      ['a'],
    );
    assert.equal(
      (await failure(crm.client.call(S.listDeals, { status: 9 as never }, t.call))).fieldViolations[0]?.field,
      'status',
    );

    const cleared = await crm.client.call(
      S.updateDeal,
      { id: a.id, contact_id: '', owner_id: '', expected_close_date: '', confidence: 0.2 },
      t.call,
    );
    assert.deepEqual(
      [cleared.contact_id, cleared.owner_id, cleared.expected_close_date, cleared.confidence],
      [undefined, undefined, undefined, 0.2],
    );
    const noConf = await crm.client.call(
      S.updateDeal,
      { id: c.id, update_mask: ['confidence', 'metadata'], metadata: { x: [1] } },
      t.call,
    );
    assert.equal(noConf.confidence, undefined);
    assert.deepEqual(noConf.metadata, { x: [1] });
    assert.equal(
      (await failure(crm.client.call(S.updateDeal, { id: c.id, update_mask: ['title'] }, t.call))).fieldViolations[0]
        ?.field,
      'title',
      'a title cannot be cleared',
    );

    await crm.client.call(S.deleteDeal, { id: b.id }, t.call);
    assert.equal((await failure(crm.client.call(S.getDeal, { id: b.id }, t.call))).reason, 'DEAL_NOT_FOUND');
    assert.equal((await failure(crm.client.call(S.listDealHistory, { id: b.id }, t.call))).code, grpc.status.NOT_FOUND);
    assert.equal(
      (await failure(crm.client.call(S.updateDeal, { id: b.id, title: 'x' }, t.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.deepEqual(await list({}), ['c', 'a']);
  });

  it('chains the history of 20 parallel moves of one deal (each from = the previous to)', async () => {
    const t = tenant();
    const p = await pipeline(t);
    const d = await crm.client.call(S.createDeal, { title: 'contended', amount: 5 }, t.call);
    const targets = Array.from({ length: 20 }, (_, i) => p.stages[(i % 4) + 1]!.id);
    const results = await Promise.allSettled(
      targets.map((stage_id) => crm.client.call(S.updateDeal, { id: d.id, stage_id }, t.call)),
    );
    assert.deepEqual(
      results.filter((r) => r.status === 'rejected'),
      [],
    );
    const h = (await crm.client.call(S.listDealHistory, { id: d.id }, t.call)).data;
    assert.ok(h.length >= 2);
    assert.equal(h[0]!.from_stage_id, undefined);
    for (let i = 1; i < h.length; i++) {
      assert.equal(h[i]!.from_stage_id, h[i - 1]!.to_stage_id, `row ${i} chains`);
      assert.notEqual(h[i]!.from_stage_id, h[i]!.to_stage_id, `row ${i} is a real move`);
    }
    const now = await crm.client.call(S.getDeal, { id: d.id }, t.call);
    assert.equal(h[h.length - 1]!.to_stage_id, now.stage_id);
    const seqs = await crm.db.query('SELECT seq FROM deal_stage_history WHERE deal_id = $1 ORDER BY seq', [d.id]);
    assert.deepEqual(
      seqs.rows.map((r) => r.seq),
      h.map((_, i) => i + 1),
    );
  });

  it('never fails with a 5xx or a deadlock when deals are created in a pipeline being deleted (200 rounds)', async () => {
    const t = tenant();
    const { outcomes, count } = outcomeCounter();
    for (let round = 0; round < 200; round++) {
      const p = await pipeline(t);
      await Promise.all([
        count('create', crm.client.call(S.createDeal, { title: `r${round}`, pipeline_id: p.id }, t.call)),
        count('create', crm.client.call(S.createDeal, { title: `r${round}`, stage_id: p.stages[1]!.id }, t.call)),
        count('delete', crm.client.call(S.deletePipeline, { id: p.id }, t.call)),
        count('create', crm.client.call(S.createDeal, { title: `r${round}`, pipeline_id: p.id }, t.call)),
      ]);
    }
    // A create after the delete finds no pipeline (400 on the field, as any unknown id); a delete
    // after a create finds deals (409). Nothing else, in particular no INTERNAL and no ABORTED.
    const allowed = new Set(['create ok', 'create INVALID_ARGUMENT', 'delete ok', 'delete FAILED_PRECONDITION']);
    assert.deepEqual(
      [...outcomes.keys()].filter((o) => !allowed.has(o)),
      [],
      JSON.stringify(Object.fromEntries(outcomes)),
    );
  });

  it('never deadlocks when deals move while their stage is deleted (deals moved elsewhere) or their pipeline gets a stage', async () => {
    const t = tenant();
    const { outcomes, count } = outcomeCounter();
    for (let round = 0; round < 50; round++) {
      const p = await pipeline(t);
      const [lead, qualified, proposal] = p.stages;
      const ds = await Promise.all(
        [1, 2, 3].map(() => crm.client.call(S.createDeal, { title: 'd', stage_id: lead!.id }, t.call)),
      );
      await Promise.all([
        ...ds.map((d, i) =>
          count(
            'move',
            crm.client.call(S.updateDeal, { id: d.id, stage_id: i === 0 ? lead!.id : qualified!.id }, t.call),
          ),
        ),
        count(
          'delete stage',
          crm.client.call(
            S.deletePipelineStage,
            { pipeline_id: p.id, stage_id: lead!.id, move_deals_to_stage_id: proposal!.id },
            t.call,
          ),
        ),
        count(
          'add stage',
          crm.client.call(S.createPipelineStage, { pipeline_id: p.id, name: `s${round}`, stage_type: OPEN }, t.call),
        ),
      ]);
    }
    // A move to the deleted stage after its delete is a 400; nothing else fails.
    const allowed = new Set(['move ok', 'move INVALID_ARGUMENT', 'delete stage ok', 'add stage ok']);
    assert.deepEqual(
      [...outcomes.keys()].filter((o) => !allowed.has(o)),
      [],
      JSON.stringify(Object.fromEntries(outcomes)),
    );
  });

  it("reads a locked deal's stage as it is after the wait, even a stage created while it waited", async () => {
    // The lock and the read are one statement whose stage lookups use the snapshot taken before
    // the wait: a concurrent move into a stage newer than that snapshot must not lose the deal or
    // leave it without a stage (it is read again).
    const t = tenant();
    const p = await pipeline(t);
    const d = await crm.client.call(S.createDeal, { title: 'd', amount: 100 }, t.call);
    const mover = await crm.db.connect();
    const reader = await crm.db.connect();
    const newStage = randomUUID();
    try {
      await mover.query('BEGIN');
      await mover.query(
        `INSERT INTO pipeline_stages (id, tenant_id, pipeline_id, name, stage_type, display_order)
         VALUES ($1, $2, $3, 'Brand new', 'open', 99)`,
        [newStage, t.id, p.id],
      );
      await mover.query('UPDATE deals SET stage_id = $2 WHERE id = $1', [d.id, newStage]);
      await reader.query('BEGIN');
      const locked = findDeal(reader, t.id, d.id, { forUpdate: true });
      // The reader's statement has begun (and waits for the mover's row lock) before the mover commits.
      await eventually('the reader waits for the row lock', async () => {
        await mover.query('SELECT pg_stat_clear_snapshot()'); // a transaction otherwise sees one snapshot of the activity
        const { rows } = await mover.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'`,
        );
        return rows[0]!.n > 0;
      });
      await mover.query('COMMIT');
      const row = await locked;
      assert.deepEqual([row?.stage_id, row?.stage_name, row?.status], [newStage, 'Brand new', 'open']);
      await reader.query('COMMIT');
    } finally {
      mover.release();
      reader.release();
    }
  });

  it('keeps tenants apart on every by-id rpc', async () => {
    const owner = tenant();
    const other = tenant();
    const p = await pipeline(owner);
    const others = await pipeline(other);
    const d = await crm.client.call(S.createDeal, { title: 'secret' }, owner.call);
    const calls = [
      () => crm.client.call(S.getDeal, { id: d.id }, other.call),
      () => crm.client.call(S.updateDeal, { id: d.id, title: 'mine' }, other.call),
      // A move: to a stage of the caller's, and to one of the owner's (the missing deal answers first).
      () => crm.client.call(S.updateDeal, { id: d.id, stage_id: others.stages[1]!.id }, other.call),
      () => crm.client.call(S.updateDeal, { id: d.id, stage_id: p.stages[1]!.id }, other.call),
      () => crm.client.call(S.deleteDeal, { id: d.id }, other.call),
      () => crm.client.call(S.listDealHistory, { id: d.id }, other.call),
    ];
    for (const c of calls) assert.equal((await failure(c())).code, grpc.status.NOT_FOUND);
    // Another tenant's stage or pipeline cannot take this tenant's deal.
    assert.equal(
      (await failure(crm.client.call(S.createDeal, { title: 'x', stage_id: p.stages[0]!.id }, other.call)))
        .fieldViolations[0]?.field,
      'stage_id',
    );
    assert.equal(
      (await failure(crm.client.call(S.createDeal, { title: 'x', pipeline_id: p.id }, other.call))).fieldViolations[0]
        ?.field,
      'pipeline_id',
    );
    assert.deepEqual((await crm.client.call(S.listDeals, {}, other.call)).data, []);
    assert.equal((await crm.client.call(S.getDeal, { id: d.id }, owner.call)).title, 'secret');
  });
});

/** Tallies each call's outcome as "<rpc> ok" or "<rpc> <grpc status>" (the race tests assert on the set). */
function outcomeCounter() {
  const outcomes = new Map<string, number>();
  const count = (rpc: string, p: Promise<unknown>) =>
    p
      .then(
        () => `${rpc} ok`,
        (err: grpc.ServiceError) => `${rpc} ${grpc.status[err.code]}`,
      )
      .then((o) => outcomes.set(o, (outcomes.get(o) ?? 0) + 1));
  return { outcomes, count };
}
