import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DomainError } from '@workauto/grpc';
import { buildRoutes, loadRoutes, type Route } from './routes.js';
import { buildRequest } from './transcode.js';
import { fixtureFile } from '@workauto/protos/fixtures';
import { ListThingsRequest } from '@workauto/protos/fixtures/fixture.js';

const routes = buildRoutes(fixtureFile('fixture'));
const route = (rpc: string): Route => routes.find((r) => r.rpc === rpc)!;
const ID = '0193a6b2-8f5e-7c3a-9b1d-2e4f6a8b0c1d';

/** The field violations of a request that must be refused. */
function refused(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof DomainError);
    assert.equal(err.reason, 'INVALID_ARGUMENT');
    return (err.extra.fieldViolations ?? []).map((v) => v.field);
  }
  assert.fail('expected INVALID_ARGUMENT');
}

describe('query parameters', () => {
  const list = route('ListThings');

  it('are parsed by the field type: strict integers, true|false, enums, repeated keys, timestamps', () => {
    const req = buildRequest(
      list,
      {},
      {
        limit: '20',
        archived: 'false',
        kinds: ['big_box', 'small'],
        since: '2026-01-01T00:00:00Z',
        min_amount: '-5',
        min_ratio: '0.5',
        alias: 'a',
      },
      undefined,
    );
    assert.deepEqual(req, {
      limit: 20,
      archived: false,
      kinds: [1, 2],
      since: new Date(Date.UTC(2026, 0, 1)),
      min_amount: -5,
      min_ratio: 0.5,
      alias: 'a',
    });
    assert.deepEqual(
      ListThingsRequest.decode(list.requestType.encode(req)),
      { ...ListThingsRequest.fromPartial({}), ...req },
      'the service reads what the query said',
    );
    assert.deepEqual(
      buildRequest(list, {}, { kinds: 'small' }, undefined),
      { kinds: [2] },
      'one value of a repeated field',
    );
  });

  it('refuse bad values, unknown names, repeats of single fields, and message fields', () => {
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { limit: '1.5' }, undefined)),
      ['limit'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { limit: '' }, undefined)),
      ['limit'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { limit: '0x10' }, undefined)),
      ['limit'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { limit: '99999999999' }, undefined)),
      ['limit'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { min_ratio: '0x10' }, undefined)),
      ['min_ratio'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { archived: 'yes' }, undefined)),
      ['archived'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { archived: 'TRUE' }, undefined)),
      ['archived'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { kinds: ['small', 'huge'] }, undefined)),
      ['kinds[1]'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { colour: 'red' }, undefined)),
      ['colour'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { limit: ['1', '2'] }, undefined)),
      ['limit'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { stage: 'x' }, undefined)),
      ['stage'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { since: 'yesterday' }, undefined)),
      ['since'],
    );
    assert.deepEqual(
      refused(() => buildRequest(list, {}, { hasOwnProperty: 'x' }, undefined)),
      ['hasOwnProperty'],
    );
  });

  it('are dropped, not refused, when unknown on a redirect route (a third party writes that URL)', () => {
    const req = buildRequest(
      route('FinishLogin'),
      { provider: 'p' },
      { code: 'c', state: 's', scope: 'openid', iss: 'https://idp' },
      undefined,
    );
    assert.deepEqual(req, { provider: 'p', code: 'c', state: 's' });
  });

  it('are refused on body "*" routes, where every field is in the body', () => {
    assert.deepEqual(
      refused(() => buildRequest(route('CreateThing'), {}, { name: 'x' }, { name: 'x' })),
      ['name'],
    );
  });
});

describe('path variables and bodies', () => {
  it('must be UUIDs when named id or *_id', () => {
    assert.deepEqual(buildRequest(route('GetThing'), { id: ID }, {}, undefined), { id: ID });
    assert.deepEqual(
      refused(() => buildRequest(route('GetThing'), { id: 'not-a-uuid' }, {}, undefined)),
      ['id'],
    );
    assert.deepEqual(
      refused(() => buildRequest(route('SetLabel'), { thing_id: '123', key: 'k' }, {}, {})),
      ['thing_id'],
    );
    assert.deepEqual(buildRequest(route('SetLabel'), { thing_id: ID, key: 'any text' }, {}, { text: 'hi' }), {
      thing_id: ID,
      key: 'any text',
      label: { text: 'hi' },
    });
  });

  it('map body "*" onto the request, and refuse a path variable repeated in the body', () => {
    assert.deepEqual(buildRequest(route('CreateThing'), {}, {}, { name: 'n', kind: 'small' }), { name: 'n', kind: 2 });
    assert.deepEqual(
      refused(() => buildRequest(route('CreateThing'), {}, {}, undefined)),
      ['name'],
      'a REQUIRED field (google.api.field_behavior) left out is refused here, as the OpenAPI document says',
    );
    assert.deepEqual(
      refused(() => buildRequest(route('CreateThing'), {}, {}, { name: null, kind: 'small' })),
      ['name'],
    );
    assert.deepEqual(
      refused(() => buildRequest(route('CreateThing'), {}, {}, [1])),
      ['(body)'],
    );
    assert.deepEqual(
      refused(() => buildRequest(route('CreateThing'), {}, {}, 'text')),
      ['(body)'],
    );
  });

  it('map body "field" onto that field, with paths under its name', () => {
    assert.deepEqual(
      refused(() => buildRequest(route('SetLabel'), { thing_id: ID, key: 'k' }, {}, { txt: 'typo' })),
      ['label.txt'],
    );
    assert.deepEqual(
      refused(() => buildRequest(route('SetLabel'), { thing_id: ID, key: 'k' }, {}, 'x')),
      ['label'],
    );
  });

  it('refuse a body where the route takes none', () => {
    assert.deepEqual(buildRequest(route('MarkThing'), { id: ID }, {}, {}), { id: ID }, 'an empty object is no body');
    assert.deepEqual(
      refused(() => buildRequest(route('MarkThing'), { id: ID }, {}, { x: 1 })),
      ['(body)'],
    );
  });

  it('report every violation of the path, query and body at once', () => {
    const fields = refused(() =>
      buildRequest(route('SetLabel'), { thing_id: 'x', key: 'k' }, { extra: '1' }, { colour: 'red' }),
    );
    assert.deepEqual(fields.sort(), ['extra', 'label.colour', 'thing_id']);
  });
});

describe('PUT with an update_mask', () => {
  const put = buildRoutes(fixtureFile('put')); // PUT /events/{id} updates only the fields it carries
  const by = (rpc: string) => put.find((r) => r.rpc === rpc)!;

  it("gets the body's keys as the mask, nulls included (they clear), as PATCH does", () => {
    const req = buildRequest(by('Carried'), { id: ID }, {}, { title: 'x', note: null });
    assert.deepEqual(req, { id: ID, title: 'x', update_mask: ['title', 'note'] });
    assert.ok(
      refused(() => buildRequest(by('Carried'), { id: ID }, {}, { update_mask: 'title' })).includes('update_mask'),
      "the mask is not the client's to send",
    );
  });

  it('leaves a full-replace PUT (no update_mask field) as it was', () => {
    assert.deepEqual(buildRequest(by('Replace'), { id: ID }, {}, { title: 'x' }), { id: ID, title: 'x' });
  });
});

describe('what an unknown name is told (the product routes)', async () => {
  const product = await loadRoutes();
  const by = (rpc: string) => product.find((r) => r.rpc === rpc)!;
  /** The violations of a refused request, as the 400 lists them. */
  const told = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      assert.ok(err instanceof DomainError);
      return { message: err.message, violations: err.extra.fieldViolations ?? [] };
    }
    assert.fail('expected INVALID_ARGUMENT');
  };

  it("an unknown body field: the message's name and the fields a body may carry", () => {
    const create = told(() => buildRequest(by('CreateCalendar'), {}, {}, { name: 'Team', display_name: 'Team' }));
    assert.equal(
      create.message,
      'display_name: is not a field of CreateCalendarRequest; its fields are name, description, timezone, color, metadata',
    );
    const patch = told(() => buildRequest(by('UpdateCalendar'), { id: ID }, {}, { nam: 'x' }));
    assert.equal(
      patch.violations[0]!.description,
      'is not a field of UpdateCalendarRequest; its fields are name, description, timezone, color, metadata',
      'not the path id nor the update_mask, which a body must not carry',
    );
  });

  it('several unknown body fields: the message lists the fields a body may carry once', () => {
    const typos = told(() =>
      buildRequest(by('CreateCalendar'), {}, {}, { name: 'Team', nam: 'x', descripton: 'x', colour: 'red' }),
    );
    assert.equal(
      typos.message,
      'nam, descripton, colour: is not a field of CreateCalendarRequest; its fields are name, description, timezone, color, metadata',
    );
    assert.deepEqual(
      typos.violations.map((v) => v.field),
      ['nam', 'descripton', 'colour'],
      'each field still has its own violation',
    );
  });

  it('an unknown query parameter: the query parameters the route takes, or that it takes none', () => {
    const list = told(() =>
      buildRequest(by('ListEvents'), {}, { form: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' }, undefined),
    );
    assert.deepEqual(list.violations, [
      {
        field: 'form',
        description:
          'is not a query parameter of GET /api/v1/events; its query parameters are limit, cursor, from, to, calendar_id',
      },
      { field: 'from', description: 'is required (a query parameter)' },
    ]);
    const get = told(() => buildRequest(by('GetCalendar'), { id: ID }, { expand: 'events' }, undefined));
    assert.deepEqual(get.violations, [
      { field: 'expand', description: 'is not a query parameter of GET /api/v1/calendars/{id}, which takes none' },
    ]);
  });

  it('fills public_base_url itself, and never takes it from the client', () => {
    const create = by('CreateCalendarFeedToken');
    assert.deepEqual(
      buildRequest(create, { id: ID }, {}, undefined, { public_base_url: () => 'https://api.example.com' }),
      { id: ID, public_base_url: 'https://api.example.com' },
    );
    assert.deepEqual(
      told(() =>
        buildRequest(create, { id: ID }, { public_base_url: 'https://evil.example' }, undefined, {
          public_base_url: () => 'https://api.example.com',
        }),
      ).violations,
      [{ field: 'public_base_url', description: 'is set by the gateway; leave it out' }],
    );
    let asked = 0;
    buildRequest(by('GetCalendar'), { id: ID }, {}, undefined, { public_base_url: () => String(++asked) });
    assert.equal(asked, 0, 'a route whose request has no such field never computes it');
  });

  it('the feed takes its token as a query parameter', () => {
    assert.deepEqual(buildRequest(by('StreamCalendarFeed'), { id: ID }, { token: 'wkcal_x' }, undefined), {
      id: ID,
      token: 'wkcal_x',
    });
  });
});
