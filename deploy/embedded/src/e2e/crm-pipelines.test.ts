import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { paths, Schemas } from '@workauto/client';
import {
  assertError,
  assertRecord,
  fails,
  ok,
  startTestStack,
  violations,
  type TenantFixture,
  type TestStack,
} from './harness.js';

const RECORD = {
  id: 'uuid',
  tenant_id: 'uuid',
  metadata: 'object',
  created_at: 'date-time',
  updated_at: 'date-time',
} as const;
const PIPELINE = {
  ...RECORD,
  name: 'string',
  display_order: 'integer',
  is_default: 'boolean',
  currency: 'string',
  stages: 'array',
} as const;
const STAGE = {
  ...RECORD,
  pipeline_id: 'uuid',
  name: 'string',
  stage_type: 'string',
  display_order: 'integer',
} as const;
const DEAL = {
  ...RECORD,
  pipeline_id: 'uuid',
  stage_id: 'uuid',
  title: 'string',
  amount: 'number',
  currency: 'string',
  status: 'string',
} as const;
const HISTORY = {
  id: 'uuid',
  tenant_id: 'uuid',
  deal_id: 'uuid',
  changed_at: 'date-time',
  to_stage_id: 'uuid',
  to_stage_name: 'string',
} as const;
const SUMMARY = {
  pipeline_id: 'uuid',
  pipeline_name: 'string',
  stages: 'array',
  total_deals: 'integer',
  total_value: 'number',
  weighted_value: 'number',
} as const;
const STAGE_SUMMARY = {
  stage_id: 'uuid',
  stage_name: 'string',
  stage_type: 'string',
  deal_count: 'integer',
  total_value: 'number',
  weighted_value: 'number',
} as const;
const CONTACT = { ...RECORD, name: 'string' } as const;
const CHANNEL = {
  ...RECORD,
  contact_id: 'uuid',
  type: 'string',
  is_primary: 'boolean',
  is_verified: 'boolean',
  preference_order: 'integer',
} as const;

type Stage = Schemas['PipelineStage'];
const SALES: Schemas['StageInput'][] = [
  { name: 'Lead', stage_type: 'open', default_confidence: 0.1, display_order: 1 },
  { name: 'Proposal', stage_type: 'open', display_order: 2 },
  { name: 'Won', stage_type: 'won', display_order: 3 },
  { name: 'Lost', stage_type: 'lost', display_order: 4 },
];

describe('crm-pipelines end to end', () => {
  let stack: TestStack;
  let a: TenantFixture;
  let b: TenantFixture;

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 10_000 } });
    assert.ok(
      stack.services.crm_pipelines,
      'deploy/embedded/src/stack.ts must start crm-pipelines under the key crm_pipelines',
    );
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
  });
  after(() => stack?.stop());

  const call = (method: string, path: string, key: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) });

  it('serves every pipeline and stage endpoint with the records of docs/crm-pipelines.md', async () => {
    const api = stack.client(a.key);
    const p = await ok(
      api.POST('/api/v1/pipelines', {
        body: { name: 'Sales', description: 'New business', is_default: true, stages: SALES },
      }),
      201,
    );
    assertRecord(p, PIPELINE, 'Pipeline');
    assert.deepEqual(
      [p.currency, p.is_default, p.description, p.deleted_at, p.tenant_id],
      ['USD', true, 'New business', null, a.id],
    );
    assert.deepEqual(
      p.stages.map((s) => [s.name, s.stage_type, s.display_order]),
      [
        ['Lead', 'open', 1],
        ['Proposal', 'open', 2],
        ['Won', 'won', 3],
        ['Lost', 'lost', 4],
      ],
    );
    for (const s of p.stages) assertRecord(s, STAGE, 'PipelineStage');
    assert.equal(p.stages[0]!.default_confidence, 0.1);
    assert.equal(p.stages[1]!.default_confidence, null);

    const pipeline = { params: { path: { id: p.id } } };
    assert.deepEqual(await ok(api.GET('/api/v1/pipelines/{id}', pipeline)), p);
    const list = await ok(api.GET('/api/v1/pipelines', { params: { query: { limit: 10 } } }));
    assert.deepEqual(Object.keys(list).sort(), ['data', 'has_more', 'next_cursor']);
    assert.deepEqual([list.data.map((x) => x.id), list.has_more, list.next_cursor], [[p.id], false, null]);

    const patched = await ok(
      api.PATCH('/api/v1/pipelines/{id}', {
        ...pipeline,
        body: { name: 'Sales EU', currency: 'EUR', metadata: { region: 'eu' } },
      }),
    );
    assert.deepEqual([patched.name, patched.currency, patched.metadata], ['Sales EU', 'EUR', { region: 'eu' }]);

    const stage = await ok(
      api.POST('/api/v1/pipelines/{pipeline_id}/stages', {
        params: { path: { pipeline_id: p.id } },
        body: { name: 'Demo', stage_type: 'open', default_confidence: 0.4, display_order: 2 },
      }),
      201,
    );
    assertRecord(stage, STAGE, 'PipelineStage');
    assert.deepEqual([stage.display_order, stage.default_confidence, stage.pipeline_id], [2, 0.4, p.id]);
    const onStage = { params: { path: { pipeline_id: p.id, stage_id: stage.id } } };
    const moved = await ok(
      api.PATCH('/api/v1/pipelines/{pipeline_id}/stages/{stage_id}', {
        ...onStage,
        body: { name: 'Live demo', display_order: 1 },
      }),
    );
    assert.deepEqual([moved.name, moved.display_order], ['Live demo', 1]);
    const reordered = await ok(api.GET('/api/v1/pipelines/{id}', pipeline));
    assert.deepEqual(
      reordered.stages.map((s) => [s.name, s.display_order]),
      [
        ['Live demo', 1],
        ['Lead', 2],
        ['Proposal', 3],
        ['Won', 4],
        ['Lost', 5],
      ],
    );
    const delStage = await api.DELETE('/api/v1/pipelines/{pipeline_id}/stages/{stage_id}', onStage);
    assert.equal(delStage.response.status, 204);
    assert.equal(await delStage.response.text(), '');

    const second = await ok(
      api.POST('/api/v1/pipelines', { body: { name: 'Partners', stages: [{ name: 'Open', stage_type: 'open' }] } }),
      201,
    );
    assert.deepEqual([second.is_default, second.currency], [false, 'USD']);
    const other = { params: { path: { id: second.id } } };
    assert.equal((await api.DELETE('/api/v1/pipelines/{id}', other)).response.status, 204);
    await fails(api.GET('/api/v1/pipelines/{id}', other), 404, 'PIPELINE_NOT_FOUND');
  });

  it('serves deals, their history and the pipeline summary', async () => {
    const api = stack.client(a.key);
    const p = await ok(
      api.POST('/api/v1/pipelines', { body: { name: 'Forecast', is_default: true, stages: SALES } }),
      201,
    );
    const [lead, proposal, won, lost] = p.stages as [Stage, Stage, Stage, Stage];
    const contact = await ok(api.POST('/api/v1/contacts', { body: { name: 'Dana' } }), 201);
    const d = await ok(
      api.POST('/api/v1/deals', {
        body: {
          title: 'Acme renewal',
          amount: 1200.5,
          confidence: 0.5,
          contact_id: contact.id,
          owner_id: a.ownerId,
          expected_close_date: '2026-12-31',
          metadata: { src: 'e2e' },
        },
      }),
      201,
    );
    assertRecord(d, DEAL, 'Deal');
    assert.deepEqual(
      [
        d.pipeline_id,
        d.stage_id,
        d.status,
        d.amount,
        d.currency,
        d.confidence,
        d.contact_id,
        d.owner_id,
        d.expected_close_date,
        d.deleted_at,
      ],
      [p.id, lead.id, 'open', 1200.5, 'USD', 0.5, contact.id, a.ownerId, '2026-12-31', null],
    );
    const newDeal = (title: string, amount: number, stage_id: string) =>
      ok(api.POST('/api/v1/deals', { body: { title, amount, stage_id } }), 201);
    const d2 = await newDeal('Small', 99.99, proposal.id);
    const d3 = await newDeal('Lost one', 500, lost.id);
    assert.equal(d3.status, 'lost');

    const deal = (id: string) => ({ params: { path: { id } } });
    assert.deepEqual(await ok(api.GET('/api/v1/deals/{id}', deal(d.id))), d);
    await ok(api.PATCH('/api/v1/deals/{id}', { ...deal(d.id), body: { stage_id: proposal.id, amount: 1300 } }));
    const closed = await ok(api.PATCH('/api/v1/deals/{id}', { ...deal(d.id), body: { stage_id: won.id } }));
    assert.deepEqual([closed.status, closed.amount], ['won', 1300]);

    const history = await ok(api.GET('/api/v1/deals/{id}/history', deal(d.id)));
    assert.ok(Array.isArray(history), 'a bare array');
    for (const h of history) assertRecord(h, HISTORY, 'DealStageHistoryEntry');
    assert.deepEqual(
      history.map((h) => [h.from_stage_name, h.to_stage_name, h.amount_at_change, h.confidence_at_change]),
      [
        [null, 'Lead', 1200.5, 0.5],
        ['Lead', 'Proposal', 1300, 0.5],
        ['Proposal', 'Won', 1300, 0.5],
      ],
    );
    assert.equal(history[1]!.from_stage_id, lead.id);

    const deals = async (query: paths['/api/v1/deals']['get']['parameters']['query']) =>
      (await ok(api.GET('/api/v1/deals', { params: { query } }))).data.map((x) => x.id);
    assert.deepEqual(await deals({ pipeline_id: p.id, status: 'open' }), [d2.id]);
    assert.deepEqual(await deals({ contact_id: contact.id, owner_id: a.ownerId }), [d.id]);
    assert.deepEqual(await deals({ stage_id: lost.id }), [d3.id]);

    const pipeline = { params: { path: { id: p.id } } };
    const summary = await ok(api.GET('/api/v1/pipelines/{id}/summary', pipeline));
    assertRecord(summary, SUMMARY, 'PipelineSummary');
    for (const s of summary.stages) assertRecord(s, STAGE_SUMMARY, 'StageSummary');
    assert.deepEqual(
      summary.stages.map((s) => [s.stage_name, s.stage_type, s.deal_count, s.total_value, s.weighted_value]),
      [
        ['Lead', 'open', 0, 0, 0],
        ['Proposal', 'open', 1, 99.99, 0],
        ['Won', 'won', 1, 1300, 1300],
        ['Lost', 'lost', 1, 500, 0],
      ],
    );
    assert.deepEqual([summary.total_deals, summary.total_value, summary.weighted_value], [3, 1899.99, 1300]);

    assert.equal((await api.DELETE('/api/v1/deals/{id}', deal(d3.id))).response.status, 204);
    await fails(api.GET('/api/v1/deals/{id}', deal(d3.id)), 404, 'DEAL_NOT_FOUND');
    await fails(api.GET('/api/v1/deals/{id}/history', deal(d3.id)), 404);
    const after = await ok(api.GET('/api/v1/pipelines/{id}/summary', pipeline));
    assert.deepEqual([after.total_deals, after.total_value], [2, 1399.99]);

    // A stage holding deals: 409, unless the body names where they go.
    const onProposal = { params: { path: { pipeline_id: p.id, stage_id: proposal.id } } };
    await fails(api.DELETE('/api/v1/pipelines/{pipeline_id}/stages/{stage_id}', onProposal), 409, 'STAGE_HAS_DEALS');
    const movedAway = await api.DELETE('/api/v1/pipelines/{pipeline_id}/stages/{stage_id}', {
      ...onProposal,
      body: { move_deals_to_stage_id: lead.id },
    });
    assert.equal(movedAway.response.status, 204);
    assert.equal((await ok(api.GET('/api/v1/deals/{id}', deal(d2.id)))).stage_id, lead.id);
    await fails(api.DELETE('/api/v1/pipelines/{id}', pipeline), 409, 'PIPELINE_HAS_DEALS');
  });

  it('serves contacts and their channels', async () => {
    const created = await call('POST', '/contacts', a.key, {
      name: 'Erin Example',
      company: 'Globex',
      job_title: 'CFO',
    });
    assert.equal(created.status, 201);
    const c = created.body;
    assertRecord(c, CONTACT, 'Contact');
    assert.deepEqual([c.company, c.job_title, c.deleted_at], ['Globex', 'CFO', null]);
    assert.deepEqual((await call('GET', `/contacts/${c.id}`, a.key)).body, c);
    const patched = await call('PATCH', `/contacts/${c.id}`, a.key, { job_title: 'CEO' });
    assert.equal(patched.body.job_title, 'CEO');

    const email = await call('POST', `/contacts/${c.id}/channels`, a.key, {
      type: 'email',
      value: ' Erin@Globex.Example ',
      label: 'work',
    });
    assert.equal(email.status, 201, JSON.stringify(email.body));
    assertRecord(email.body, CHANNEL, 'ContactChannel');
    assert.deepEqual(
      [
        email.body.type,
        email.body.value,
        email.body.canonical_value,
        email.body.key_version,
        email.body.is_primary,
        email.body.is_verified,
        email.body.preference_order,
        email.body.label,
      ],
      ['email', 'Erin@Globex.Example', 'erin@globex.example', 1, true, false, 1, 'work'],
    );
    const phone = await call('POST', `/contacts/${c.id}/channels`, a.key, {
      type: 'phone',
      value: '(415) 555-2671',
      region: 'US',
      is_primary: true,
    });
    assert.equal(phone.status, 201, JSON.stringify(phone.body));
    assert.equal(phone.body.canonical_value, '+14155552671');
    const second = await call('POST', `/contacts/${c.id}/channels`, a.key, {
      type: 'email',
      value: 'erin.private@example.com',
    });
    assert.equal(second.body.is_primary, false);

    const listed = await call('GET', `/contacts/${c.id}/channels`, a.key);
    assert.equal(listed.status, 200);
    assert.ok(Array.isArray(listed.body), 'a bare array');
    assert.equal(listed.body.length, 3);
    const promoted = await call('PATCH', `/contacts/${c.id}/channels/${second.body.id}`, a.key, { is_primary: true });
    assert.equal(promoted.status, 200);
    const after = (await call('GET', `/contacts/${c.id}/channels`, a.key)).body.filter((x: any) => x.type === 'email');
    assert.deepEqual(
      after.map((x: any) => [x.value, x.is_primary]),
      [
        ['Erin@Globex.Example', false],
        ['erin.private@example.com', true],
      ],
    );
    assert.equal((await call('DELETE', `/contacts/${c.id}/channels/${second.body.id}`, a.key)).status, 204);
    const left = (await call('GET', `/contacts/${c.id}/channels`, a.key)).body.filter((x: any) => x.type === 'email');
    assert.deepEqual(
      left.map((x: any) => [x.value, x.is_primary]),
      [['Erin@Globex.Example', true]],
    );

    assertError(
      await call('POST', `/contacts/${c.id}/channels`, a.key, { type: 'email', value: 'ERIN@globex.example' }),
      409,
      'CHANNEL_VALUE_TAKEN',
    );
    const search = await call('GET', '/contacts?q=globex', a.key);
    assert.deepEqual(
      search.body.data.map((x: any) => x.id),
      [c.id],
    );
    assert.deepEqual(
      (await call('GET', '/contacts?q=4155552671', a.key)).body.data.map((x: any) => x.id),
      [c.id],
    );
    assert.equal((await call('DELETE', `/contacts/${c.id}`, a.key)).status, 204);
    assertError(await call('GET', `/contacts/${c.id}`, a.key), 404, 'CONTACT_NOT_FOUND');
    assert.deepEqual((await call('GET', '/contacts?q=globex', a.key)).body.data, []);
  });

  it('answers bad input with 400 in the error shape of docs/api.md §5', async () => {
    const p = (await call('POST', '/pipelines', a.key, { name: 'Checks', stages: SALES })).body;
    const eur = (await call('POST', '/pipelines', a.key, { name: 'Euro', currency: 'EUR', stages: SALES })).body;
    const c = (await call('POST', '/contacts', a.key, { name: 'Val' })).body;
    const cases: [string, string, unknown, string][] = [
      ['POST', '/pipelines', { name: 'x', stages: [{ name: 'a', stage_type: 'maybe' }] }, 'stages[0].stage_type'],
      [
        'POST',
        '/pipelines',
        { name: 'x', stages: [{ name: 'a', stage_type: 'open', default_confidence: 1.5 }] },
        'stages[0].default_confidence',
      ],
      [
        'POST',
        '/pipelines',
        { name: 'x', stages: [{ name: 'a', stage_type: 'open', default_confidence: -0.1 }] },
        'stages[0].default_confidence',
      ],
      ['POST', '/pipelines', { name: 'x', currency: 'DOLLARS' }, 'currency'],
      ['POST', '/pipelines', { name: '' }, 'name'],
      ['POST', '/pipelines', { name: 'x', stagez: [] }, 'stagez'],
      ['POST', `/pipelines/${p.id}/stages`, { name: 'x', stage_type: 'OPEN' }, 'stage_type'],
      ['PATCH', `/pipelines/${p.id}/stages/${p.stages[0].id}`, { default_confidence: 2 }, 'default_confidence'],
      ['POST', '/deals', { title: 'x', pipeline_id: p.id, confidence: 1.01 }, 'confidence'],
      ['POST', '/deals', { title: 'x', pipeline_id: eur.id, currency: 'USD' }, 'currency'],
      ['POST', '/deals', { title: 'x', pipeline_id: p.id, currency: 'EUR' }, 'currency'],
      ['POST', '/deals', { title: 'x', pipeline_id: p.id, amount: 10.001 }, 'amount'],
      ['POST', '/deals', { title: 'x', pipeline_id: p.id, amount: '10' }, 'amount'],
      ['POST', '/deals', { title: 'x', pipeline_id: p.id, expected_close_date: '31.12.2026' }, 'expected_close_date'],
      ['GET', '/deals?status=pending', undefined, 'status'],
      ['GET', '/deals?limit=0', undefined, 'limit'],
      ['POST', `/contacts/${c.id}/channels`, { type: 'phone', value: '12345' }, 'value'],
      ['POST', `/contacts/${c.id}/channels`, { type: 'phone', value: '+1 415 555 26711' }, 'value'],
      ['POST', `/contacts/${c.id}/channels`, { type: 'phone', value: '415 555 2671', region: 'Narnia' }, 'region'],
      ['POST', `/contacts/${c.id}/channels`, { type: 'email', value: 'not-an-email' }, 'value'],
      ['POST', `/contacts/${c.id}/channels`, { type: 'fax', value: '123' }, 'type'],
      ['POST', '/contacts', { name: 'x'.repeat(201) }, 'name'],
      ['GET', '/deals/not-a-uuid', undefined, 'id'],
    ];
    const wrong: string[] = [];
    for (const [method, path, body, field] of cases) {
      const res = await call(method, path, a.key, body);
      if (res.status !== 400 || !violations(res).includes(field))
        wrong.push(
          `${method} ${path} ${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`,
        );
      else assertError(res, 400);
    }
    assert.deepEqual(wrong, []);
    const deal = (await call('POST', '/deals', a.key, { title: 'x', pipeline_id: p.id, amount: 10.5 })).body;
    const mismatch = await call('PATCH', `/deals/${deal.id}`, a.key, { pipeline_id: eur.id, currency: 'USD' });
    assertError(mismatch, 400, 'INVALID_ARGUMENT');
    assert.deepEqual(violations(mismatch), ['currency']);
    // A moved deal takes its pipeline's currency, if its amount is one in that currency.
    const yen = (await call('POST', '/pipelines', a.key, { name: 'Yen', currency: 'JPY', stages: SALES })).body;
    const noYen = await call('PATCH', `/deals/${deal.id}`, a.key, { pipeline_id: yen.id });
    assertError(noYen, 400, 'INVALID_ARGUMENT');
    assert.deepEqual(violations(noYen), ['amount']);
    const moved = await call('PATCH', `/deals/${deal.id}`, a.key, { pipeline_id: eur.id });
    assert.deepEqual([moved.status, moved.body.currency, moved.body.amount], [200, 'EUR', 10.5]);
  });

  it('keeps tenants apart on every by-id endpoint', async () => {
    const p = (await call('POST', '/pipelines', a.key, { name: 'Private', stages: SALES })).body;
    const s = p.stages[0];
    const d = (await call('POST', '/deals', a.key, { title: 'Private deal', pipeline_id: p.id })).body;
    const c = (await call('POST', '/contacts', a.key, { name: 'Private contact' })).body;
    const ch = (
      await call('POST', `/contacts/${c.id}/channels`, a.key, {
        type: 'email',
        value: `${randomUUID()}@private.example`,
      })
    ).body;
    const cases: [string, string, unknown?][] = [
      ['GET', `/pipelines/${p.id}`],
      ['PATCH', `/pipelines/${p.id}`, { name: 'taken' }],
      ['DELETE', `/pipelines/${p.id}`],
      ['GET', `/pipelines/${p.id}/summary`],
      ['POST', `/pipelines/${p.id}/stages`, { name: 'x', stage_type: 'open' }],
      ['PATCH', `/pipelines/${p.id}/stages/${s.id}`, { name: 'x' }],
      ['DELETE', `/pipelines/${p.id}/stages/${s.id}`],
      ['GET', `/deals/${d.id}`],
      ['PATCH', `/deals/${d.id}`, { title: 'taken' }],
      ['DELETE', `/deals/${d.id}`],
      ['GET', `/deals/${d.id}/history`],
      ['GET', `/contacts/${c.id}`],
      ['PATCH', `/contacts/${c.id}`, { name: 'taken' }],
      ['DELETE', `/contacts/${c.id}`],
      ['POST', `/contacts/${c.id}/channels`, { type: 'email', value: 'b@beta.example' }],
      ['GET', `/contacts/${c.id}/channels`],
      ['PATCH', `/contacts/${c.id}/channels/${ch.id}`, { label: 'taken' }],
      ['DELETE', `/contacts/${c.id}/channels/${ch.id}`],
    ];
    const leaks: string[] = [];
    for (const [method, path, body] of cases) {
      const res = await call(method, path, b.key, body);
      if (res.status !== 404) leaks.push(`${method} ${path} → ${res.status}`);
      else assertError(res, 404);
    }
    assert.deepEqual(leaks, []);
    for (const path of ['/pipelines', '/deals', '/contacts']) {
      const body = (await call('GET', path, b.key)).body;
      assert.equal(JSON.stringify(body).includes('Private'), false, `${path} of another tenant shows nothing of Alpha`);
    }
    // Beta cannot put a deal into Alpha's stage or pipeline either.
    await call('POST', '/pipelines', b.key, { name: 'Beta', stages: SALES });
    assertError(await call('POST', '/deals', b.key, { title: 'x', stage_id: s.id }), 400);
    assert.equal((await call('GET', `/pipelines/${p.id}`, a.key)).body.name, 'Private');
  });

  it('lets a viewer read but not write, as the crm policy says', async () => {
    const inv = await call('POST', '/invitations', a.key, {
      email: `viewer-${randomUUID()}@alpha.test`,
      role: 'viewer',
    });
    assert.equal(inv.status, 201, JSON.stringify(inv.body));
    const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    const viewer = claimed.body.api_key as string;
    assert.equal((await call('GET', '/pipelines', viewer)).status, 200);
    assert.equal((await call('GET', '/deals', viewer)).status, 200);
    assert.equal((await call('GET', '/contacts', viewer)).status, 200);
    assertError(await call('POST', '/pipelines', viewer, { name: 'nope' }), 403);
    assertError(await call('POST', '/contacts', viewer, { name: 'nope' }), 403);
    assertError(await stack.api('GET', '/api/v1/pipelines'), 401);
  });
});
