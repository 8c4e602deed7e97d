import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { LOST, OPEN, S, WON, failure, startCrm, tenant } from './test-support.js';

/** A seeded generator, so a failure can be replayed. */
function random(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STAGES = [
  { name: 'Lead', stage_type: OPEN, default_confidence: 0.1 },
  { name: 'Qualified', stage_type: OPEN, default_confidence: 0.3333 },
  { name: 'Proposal', stage_type: OPEN },
  { name: 'Negotiation', stage_type: OPEN, default_confidence: 0.75 },
  { name: 'Empty', stage_type: OPEN, default_confidence: 0.5 },
  { name: 'Won', stage_type: WON, default_confidence: 0.2 },
  { name: 'Lost', stage_type: LOST, default_confidence: 0.9 },
];

/** Cents (2 decimals) as the API's number. */
const money = (cents: bigint) => Number(cents) / 100;

describe('pipeline summary over gRPC', () => {
  let crm: Awaited<ReturnType<typeof startCrm>>;
  before(async () => {
    crm = await startCrm();
  });
  after(() => crm.stop());

  it('matches an independent exact computation over 500 random deals written concurrently, to the cent', async () => {
    const t = tenant();
    const p = await crm.client.call(S.createPipeline, { name: 'Forecast', stages: STAGES }, t.call);
    const noise = await crm.client.call(S.createPipeline, { name: 'Other', stages: STAGES }, t.call);
    const rnd = random(20261122);
    interface Model {
      stage: number;
      cents: bigint;
      conf: bigint | null;
      deleted: boolean;
    }
    const model: Model[] = [];
    const ids: string[] = [];
    const dealStages = [0, 1, 2, 3, 5, 6]; // never the Empty stage
    for (let batch = 0; batch < 25; batch++) {
      const created = await Promise.all(
        Array.from({ length: 20 }, () => {
          const stage = dealStages[Math.floor(rnd() * dealStages.length)]!;
          // Mostly everyday amounts, some large; confidences with up to 4 decimals, 30 % none.
          const cents = BigInt(Math.floor(rnd() * (rnd() < 0.1 ? 99_999_999_999 : 5_000_000)));
          const conf = rnd() < 0.3 ? null : BigInt(Math.floor(rnd() * 10_001));
          model.push({ stage, cents, conf, deleted: false });
          return crm.client.call(
            S.createDeal,
            {
              title: 'd',
              pipeline_id: p.id,
              stage_id: p.stages[stage]!.id,
              amount: money(cents),
              ...(conf === null ? {} : { confidence: Number(conf) / 10_000 }),
            },
            t.call,
          );
        }),
      );
      ids.push(...created.map((d) => d.id));
    }
    // Some deals move, some are deleted, some lose their confidence, some change amount — 24
    // writers at a time (distinct deals within a round, so the model's order is the database's),
    // most of them in the same few stages: the aggregates the writes keep must stay exact.
    for (let round = 0; round < 12; round++) {
      const picked = new Set<number>();
      while (picked.size < 24) picked.add(Math.floor(rnd() * model.length));
      await Promise.all(
        [...picked].map((k) => {
          const m = model[k]!;
          if (m.deleted) return Promise.resolve();
          const roll = rnd();
          if (roll < 0.2) {
            m.deleted = true;
            return crm.client.call(S.deleteDeal, { id: ids[k]! }, t.call);
          }
          if (roll < 0.7) {
            m.stage = dealStages[Math.floor(rnd() * dealStages.length)]!;
            return crm.client.call(S.updateDeal, { id: ids[k]!, stage_id: p.stages[m.stage]!.id }, t.call);
          }
          if (roll < 0.85) {
            m.conf = null;
            return crm.client.call(S.updateDeal, { id: ids[k]!, update_mask: ['confidence'] }, t.call);
          }
          m.cents = BigInt(Math.floor(rnd() * 10_000_000));
          return crm.client.call(S.updateDeal, { id: ids[k]!, amount: money(m.cents) }, t.call);
        }),
      );
    }
    await crm.client.call(S.createDeal, { title: 'elsewhere', pipeline_id: noise.id, amount: 999 }, t.call);
    assert.ok(model.filter((m) => m.deleted).length > 5);

    // Independent: integers in millionths (cents × ten-thousandths), rounded half up at the end.
    const millionths = (m: Model): bigint => {
      const type = STAGES[m.stage]!.stage_type;
      if (type === WON) return m.cents * 10_000n;
      if (type === LOST) return 0n;
      const stageDefault = STAGES[m.stage]!.default_confidence;
      const conf = m.conf ?? (stageDefault === undefined ? 0n : BigInt(Math.round(stageDefault * 10_000)));
      return m.cents * conf;
    };
    const toCents = (u: bigint) => (u + 5_000n) / 10_000n;
    const expected = STAGES.map(() => ({ n: 0, cents: 0n, weighted: 0n }));
    for (const m of model.filter((x) => !x.deleted)) {
      const e = expected[m.stage]!;
      e.n += 1;
      e.cents += m.cents;
      e.weighted += millionths(m);
    }

    const s = await crm.client.call(S.getPipelineSummary, { id: p.id }, t.call);
    assert.equal(s.pipeline_id, p.id);
    assert.equal(s.pipeline_name, 'Forecast');
    assert.equal(s.currency, 'USD');
    assert.deepEqual(
      s.stages.map((x) => x.stage_name),
      STAGES.map((x) => x.name),
    );
    assert.deepEqual(
      s.stages.map((x) => x.stage_type),
      STAGES.map((x) => x.stage_type),
    );
    assert.deepEqual(
      s.stages.map((x) => x.stage_id),
      p.stages.map((x) => x.id),
    );
    s.stages.forEach((got, i) => {
      const e = expected[i]!;
      assert.equal(got.deal_count, e.n, `${got.stage_name} count`);
      assert.equal(got.total_value, money(e.cents), `${got.stage_name} total`);
      assert.equal(got.weighted_value, money(toCents(e.weighted)), `${got.stage_name} weighted`);
    });
    assert.equal(s.stages[4]!.deal_count, 0);
    assert.equal(s.stages[4]!.total_value, 0);
    assert.equal(s.stages[6]!.weighted_value, 0, 'lost weighs 0');
    assert.equal(
      s.total_deals,
      expected.reduce((a, e) => a + e.n, 0),
    );
    assert.equal(s.total_value, money(expected.reduce((a, e) => a + e.cents, 0n)));
    assert.equal(s.weighted_value, money(toCents(expected.reduce((a, e) => a + e.weighted, 0n))));
  });

  it('weighs won at 1, lost at 0, open at the deal’s confidence, else the stage’s default, else 0', async () => {
    const t = tenant();
    const p = await crm.client.call(
      S.createPipeline,
      {
        name: 'Rule',
        stages: [
          { name: 'Defaulted', stage_type: OPEN, default_confidence: 0.3 },
          { name: 'No default', stage_type: OPEN },
          { name: 'Won', stage_type: WON, default_confidence: 0.3 },
          { name: 'Lost', stage_type: LOST, default_confidence: 0.5 },
        ],
      },
      t.call,
    );
    const deal = (stage: number, amount: number, confidence?: number) =>
      crm.client.call(
        S.createDeal,
        {
          title: 'd',
          pipeline_id: p.id,
          stage_id: p.stages[stage]!.id,
          amount,
          ...(confidence === undefined ? {} : { confidence }),
        },
        t.call,
      );
    await deal(0, 10, 0.2); // its own confidence: 2
    await deal(0, 10, 0); // a confidence of 0 is not "unset": 0
    await deal(0, 10); // the stage's default: 3
    await deal(1, 10); // neither: 0
    await deal(1, 100.01, 0.3333); // 33.333333, exact until the end
    await deal(2, 100.01, 0.3333); // won: the whole amount
    await deal(3, 100.01, 0.2); // lost: nothing
    const s = await crm.client.call(S.getPipelineSummary, { id: p.id }, t.call);
    assert.deepEqual(
      s.stages.map((x) => [x.stage_name, x.total_value, x.weighted_value]),
      [
        ['Defaulted', 30, 5],
        ['No default', 110.01, 33.33],
        ['Won', 100.01, 100.01],
        ['Lost', 100.01, 0],
      ],
    );
    // 5 + 33.333333 + 100.01 = 138.343333, rounded from the exact sum.
    assert.equal(s.weighted_value, 138.34);
  });

  it('sums exactly and rounds half away from zero once, at the end', async () => {
    const t = tenant();
    const summaryOf = async (deals: { amount: number; confidence?: number }[], stageType = OPEN) => {
      const p = await crm.client.call(
        S.createPipeline,
        { name: 'R', stages: [{ name: 'S', stage_type: stageType }] },
        t.call,
      );
      for (const d of deals)
        await crm.client.call(S.createDeal, { title: 'd', pipeline_id: p.id, stage_id: p.stages[0]!.id, ...d }, t.call);
      return crm.client.call(S.getPipelineSummary, { id: p.id }, t.call);
    };
    // Rounded per deal, 3 × 0.005 would give 3 × 0.01 = 0.03; summed first, 0.015 rounds to 0.02.
    const halves = await summaryOf([0, 1, 2].map(() => ({ amount: 0.01, confidence: 0.5 })));
    assert.deepEqual([halves.stages[0]!.weighted_value, halves.weighted_value], [0.02, 0.02]);
    // 4.69 × 0.5 = 2.345: half away from zero is 2.35 (half to even would be 2.34).
    assert.equal((await summaryOf([{ amount: 4.69, confidence: 0.5 }])).weighted_value, 2.35);
    // 4.69 × 0.4999 = 2.344531: below the half, down.
    assert.equal((await summaryOf([{ amount: 4.69, confidence: 0.4999 }])).weighted_value, 2.34);
    // Binary floating point gets this wrong: 0.1 + 0.2 !== 0.3.
    const tenths = await summaryOf([{ amount: 0.1 }, { amount: 0.2 }], WON);
    assert.deepEqual([tenths.total_value, tenths.weighted_value], [0.3, 0.3]);
  });

  it('lists every stage with zeros for an empty pipeline, and rounds to the currency’s minor unit', async () => {
    const t = tenant();
    const empty = await crm.client.call(S.createPipeline, { name: 'Empty', stages: STAGES.slice(0, 3) }, t.call);
    const s = await crm.client.call(S.getPipelineSummary, { id: empty.id }, t.call);
    assert.deepEqual(
      s.stages.map((x) => [x.stage_name, x.deal_count, x.total_value, x.weighted_value]),
      [
        ['Lead', 0, 0, 0],
        ['Qualified', 0, 0, 0],
        ['Proposal', 0, 0, 0],
      ],
    );
    assert.deepEqual([s.total_deals, s.total_value, s.weighted_value], [0, 0, 0]);
    const none = await crm.client.call(S.createPipeline, { name: 'No stages', stages: [] }, t.call);
    const n = await crm.client.call(S.getPipelineSummary, { id: none.id }, t.call);
    assert.deepEqual([n.stages, n.total_deals, n.total_value, n.weighted_value], [[], 0, 0, 0]);

    const yen = await crm.client.call(
      S.createPipeline,
      { name: 'Yen', currency: 'JPY', stages: [{ name: 'Open', stage_type: OPEN, default_confidence: 0.3333 }] },
      t.call,
    );
    await crm.client.call(S.createDeal, { title: 'a', pipeline_id: yen.id, amount: 1001 }, t.call);
    await crm.client.call(S.createDeal, { title: 'b', pipeline_id: yen.id, amount: 1001 }, t.call);
    const y = await crm.client.call(S.getPipelineSummary, { id: yen.id }, t.call);
    // 2 × 1001 × 0.3333 = 667.2666 → 667 yen (no decimals in JPY).
    assert.deepEqual(
      [y.stages[0]!.weighted_value, y.weighted_value, y.total_value, y.currency],
      [667, 667, 2002, 'JPY'],
    );
    assert.equal(
      (await failure(crm.client.call(S.getPipelineSummary, { id: yen.id }, tenant().call))).code,
      grpc.status.NOT_FOUND,
    );
  });
});
