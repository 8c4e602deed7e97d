import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DescMessage } from '@bufbuild/protobuf';
import { messageDesc, messageType } from './schema.js';
import { Member, UpdateMemberRequest, MemberRole } from './gen/workauto/identity/v1/identity.js';
import { Thing } from './gen/fixtures/fixture.js';
import {
  MappingError,
  isIsoDate,
  messageFromJson,
  messageToJson,
  parseRfc3339,
  parseTimestamp,
  timestampToJson,
  type Violation,
} from './json-mapping.js';
import { fixtureMessage } from './fixtures.js';

const memberType = messageDesc('workauto.identity.v1.Member');
const updateType = messageDesc('workauto.identity.v1.UpdateMemberRequest');
const thingType = fixtureMessage('workauto.fixture.v1.Thing');
const createType = fixtureMessage('workauto.fixture.v1.CreateThingRequest');

function fromJson(type: DescMessage, json: unknown) {
  const out: Violation[] = [];
  const obj = messageFromJson(type, json, '', out);
  if (out.length) throw new MappingError(out);
  return obj!;
}

function violations(type: DescMessage, json: unknown, hidden: string[] = []): Violation[] {
  const out: Violation[] = [];
  messageFromJson(type, json, '', out, hidden);
  return out;
}

/** JSON → the bytes the gateway sends (ts-proto) → decoded → JSON, as a response would come back. */
function roundTrip(type: DescMessage, json: unknown): Record<string, unknown> {
  const codec = messageType(type);
  return messageToJson(type, codec.decode(codec.encode(fromJson(type, json)))) as Record<string, unknown>;
}

describe('JSON → proto', () => {
  it('maps snake_case fields, lowercase enums, Struct and optional fields, and the service reads them', () => {
    const obj = fromJson(updateType, {
      id: 'x',
      name: 'Ann',
      role: 'viewer',
      metadata: { a: [1, 'two', { three: null }], ok: true },
    });
    const decoded = UpdateMemberRequest.decode(messageType(updateType).encode(obj)); // as the service sees it
    assert.equal(decoded.name, 'Ann');
    assert.equal(decoded.role, MemberRole.MEMBER_ROLE_VIEWER);
    assert.deepEqual(decoded.metadata, { a: [1, 'two', { three: null }], ok: true });
    assert.equal(decoded.email, undefined, 'an absent optional field stays unset');
  });

  it('treats null as not set, and keeps an explicit empty optional string', () => {
    const decoded = UpdateMemberRequest.decode(
      messageType(updateType).encode(fromJson(updateType, { name: null, email: '', role: null, metadata: null })),
    );
    assert.equal(decoded.name, undefined);
    assert.equal(decoded.email, '', 'proto3 optional keeps presence: "" is not "unset"');
    assert.equal(decoded.role, MemberRole.MEMBER_ROLE_UNSPECIFIED);
    assert.equal(decoded.metadata, undefined);
  });

  it('refuses a NUL character (U+0000) in text and in free JSON, naming where: PostgreSQL stores neither', () => {
    assert.throws(
      () => fromJson(updateType, { name: 'a\u0000b', metadata: { ok: 'fine', deep: [{ bad: 'x\u0000' }] } }),
      (err: MappingError) => {
        assert.deepEqual(
          err.violations.map((v) => [v.field, v.description]),
          [
            ['name', 'must not contain the NUL character (U+0000)'],
            ['metadata.deep[0].bad', 'must not contain the NUL character (U+0000)'],
          ],
        );
        return true;
      },
    );
  });

  it('rejects unknown fields, wrong types and unknown enum values with their paths', () => {
    assert.throws(
      () => fromJson(updateType, { nme: 'typo', name: 5, role: 'king', metadata: [1] }),
      (err: MappingError) => {
        assert.deepEqual(err.violations.map((v) => v.field).sort(), ['metadata', 'name', 'nme', 'role']);
        return true;
      },
    );
    assert.throws(() => fromJson(updateType, { role: 'VIEWER' }), /role/, 'enum names are lowercase only');
    // 'ı'.toUpperCase() is 'I': a name compared in upper case took this for VIEWER.
    assert.throws(() => fromJson(updateType, { role: 'v\u0131ewer' }), /role/, 'a dotless ı is not an i');
    assert.throws(
      () => fromJson(updateType, { role: 'unspecified' }),
      /role/,
      'UNSPECIFIED is not a value a client can send',
    );
    assert.throws(() => fromJson(updateType, ['not', 'an', 'object']), /JSON object/);
    assert.throws(() => fromJson(updateType, JSON.parse('{"__proto__": {"name": "x"}}')), /__proto__/);
    assert.throws(() => fromJson(updateType, { constructor: 'x' }), /constructor/);
  });

  it("tells an unknown field the message's name and its fields, at most 30 of them", () => {
    const createCalendar = messageDesc('workauto.calendar.v1.CreateCalendarRequest');
    assert.deepEqual(violations(createCalendar, { display_name: 'Team', name: 'Team' }), [
      {
        field: 'display_name',
        description:
          'is not a field of CreateCalendarRequest; its fields are name, description, timezone, color, metadata',
      },
    ]);
    assert.deepEqual(
      violations(messageDesc('workauto.calendar.v1.UpdateCalendarRequest'), { nam: 'x' }, ['id', 'update_mask']),
      [
        {
          field: 'nam',
          description:
            'is not a field of UpdateCalendarRequest; its fields are name, description, timezone, color, metadata',
        },
      ],
      'fields the caller hides (a path variable, the mask) are not offered',
    );
    const nested = violations(messageDesc('workauto.calendar.v1.CreateEventRequest'), {
      reminders: [{ method: 'popup', minute: 5 }],
    });
    assert.deepEqual(nested, [
      { field: 'reminders[0].minute', description: 'is not a field of Reminder; its fields are method, minutes' },
    ]);
    // CalendarEvent has 33 fields: the first 30 are named, then how many more.
    const [wide] = violations(messageDesc('workauto.calendar.v1.CalendarEvent'), { nope: 1 });
    const listed = /its fields are (.*) and 3 more$/.exec(wide!.description)?.[1]?.split(', ');
    assert.equal(listed?.length, 30, wide!.description);
    assert.equal(listed?.[0], 'id');
  });

  it('names nested and repeated paths: stages[1].nme, stages[0].display_order', () => {
    const v = violations(createType, {
      name: 'x',
      stages: [{ name: 'a', display_order: 1.5 }, { nme: 'typo' }, 'str'],
    });
    assert.deepEqual(
      v.map((x) => x.field),
      ['stages[0].display_order', 'stages[1].nme', 'stages[2]'],
    );
  });

  it('takes int64 as a JSON number and refuses non-integers, strings and unsafe integers', () => {
    assert.equal(roundTrip(createType, { name: 'x', amount: 9_007_199_254_740_991 }).amount, 9_007_199_254_740_991);
    assert.equal(roundTrip(createType, { name: 'x', amount: -42 }).amount, -42);
    for (const amount of ['42', 1.5, 2 ** 60, true]) {
      assert.deepEqual(
        violations(createType, { name: 'x', amount }).map((v) => v.field),
        ['amount'],
        `amount ${String(amount)}`,
      );
    }
    assert.deepEqual(
      violations(createType, { name: 'x', small: -1 }).map((v) => v.field),
      ['small'],
      'uint32 is not negative',
    );
    assert.deepEqual(violations(createType, { name: 'x', small: 4_000_000_000 }), [], 'uint32 goes past 2^31');
    assert.deepEqual(
      violations(createType, { name: 'x', stages: [{ name: 's', display_order: 2 ** 31 }] }).map((v) => v.field),
      ['stages[0].display_order'],
    );
  });

  it('maps enums with the prefix of their type: THING_KIND_BIG_BOX ↔ big_box', () => {
    assert.equal(roundTrip(createType, { name: 'x', kind: 'big_box' }).kind, 'big_box');
    const codec = messageType(createType);
    const unknown = messageToJson(createType, codec.decode(codec.encode({ name: 'x', kind: 99 })));
    assert.equal(
      (unknown as Record<string, unknown>).kind,
      null,
      'a number the enum does not name (a newer peer) is null',
    );
    const [v] = violations(createType, { name: 'x', kind: 'huge' });
    assert.equal(v?.field, 'kind');
    assert.match(v.description, /big_box, small/);
  });

  it('parses RFC 3339 timestamps with any offset and refuses other strings', () => {
    const out: Violation[] = [];
    const ts = messageFromJson(memberType, { created_at: '2026-11-22T10:00:00.123456+01:00' }, '', out) as {
      created_at: Date;
    };
    assert.deepEqual(out, []);
    assert.equal(ts.created_at.toISOString(), '2026-11-22T09:00:00.123Z', 'a Date, as ts-proto holds Timestamps');
    assert.equal(
      roundTrip(createType, { name: 'x', at: '2026-11-22T10:00:00.5+02:00' }).at,
      '2026-11-22T08:00:00.500000Z',
      'answered in UTC',
    );
    for (const bad of [
      'yesterday',
      '2026-11-22',
      '2026-02-31T00:00:00Z',
      '2026-11-22T24:00:00Z',
      '2026-11-22T10:00:00',
      '2026-11-22T10:00:00+25:00',
      1700000000,
    ]) {
      assert.equal(violations(memberType, { created_at: bad })[0]?.field, 'created_at', String(bad));
    }
    assert.equal(
      violations(memberType, { created_at: '2026-02-30T10:00:00Z' })[0]?.description,
      '2026-02-30 is not a calendar date',
    );
    assert.deepEqual(parseRfc3339('0001-01-01T00:00:00Z'), { seconds: -62135596800, nanos: 0 });
    assert.deepEqual(parseRfc3339('2026-11-22t10:00:00.5z'), {
      seconds: Date.UTC(2026, 10, 22, 10) / 1000,
      nanos: 500_000_000,
    });
    assert.equal(parseRfc3339('1969-12-31T23:59:59.25Z')?.seconds, -1);
    // The Date form services use reads the same way (V8's own parser takes 2026-02-31 as 3 March).
    assert.equal(parseTimestamp('2026-02-31T10:00:00Z'), undefined);
    assert.equal(parseTimestamp('2026-11-22T10:00:00.123456+01:00')?.toISOString(), '2026-11-22T09:00:00.123Z');
    assert.deepEqual(['2028-02-29', '2026-02-29', '2026-13-01', '0000-01-01', '31/12/2026'].map(isIsoDate), [
      true,
      false,
      false,
      false,
      false,
    ]);
  });

  it('refuses two members of one oneof, and maps keys of integer maps', () => {
    assert.deepEqual(
      violations(createType, { name: 'x', url: 'u', port: 1 }).map((v) => v.field),
      ['port'],
    );
    assert.deepEqual(
      violations(createType, { name: 'x', by_number: { '1': 'one', two: 'x' } }).map((v) => v.field),
      ['by_number.two'],
    );
    assert.deepEqual(
      violations(createType, { name: 'x', url: null, port: 1 }),
      [],
      'null is not set, so it does not count',
    );
  });

  it('takes wrapper types as bare values', () => {
    assert.deepEqual(violations(createType, { name: 'x', big: 5 }), []);
    assert.deepEqual(
      violations(createType, { name: 'x', big: 'five' }).map((v) => v.field),
      ['big'],
    );
  });
});

describe('proto → JSON', () => {
  it('writes every field: defaults, nulls for unset optionals, RFC 3339 with microseconds, raw metadata', () => {
    const member: Member = {
      id: 'm1',
      tenant_id: 't1',
      name: 'Ann',
      role: MemberRole.MEMBER_ROLE_OWNER,
      is_active: false,
      metadata: { k: 'v', n: 2 },
      created_at: new Date('2026-11-22T10:00:00.123Z'),
      updated_at: undefined,
    };
    const json = messageToJson(memberType, Member.decode(Member.encode(member).finish()));
    assert.deepEqual(messageToJson(memberType, member), json, "the handler's own object maps alike (event data)");
    assert.deepEqual(json, {
      id: 'm1',
      tenant_id: 't1',
      name: 'Ann',
      role: 'owner',
      is_active: false,
      metadata: { k: 'v', n: 2 },
      created_at: '2026-11-22T10:00:00.123000Z',
      updated_at: null,
      email: null,
      contact_id: null,
    });
    assert.equal(timestampToJson(new Date(5)), '1970-01-01T00:00:00.005000Z');
    assert.equal(timestampToJson(new Date(-1)), '1969-12-31T23:59:59.999000Z');
    assert.equal(timestampToJson(new Date(Date.UTC(10000, 0, 1))), null, "outside Timestamp's range");
    assert.equal(timestampToJson(new Date(Date.UTC(10000, 0, 1) - 1)), '9999-12-31T23:59:59.999000Z');
    const early = new Date(Date.UTC(2000, 1, 29, 7, 8, 9, 10));
    early.setUTCFullYear(1);
    assert.equal(timestampToJson(early), '0001-03-01T07:08:09.010000Z', 'four digits of year, 1 is not a leap year');
    assert.equal(timestampToJson(new Date(Date.UTC(2024, 1, 29, 23, 0, 0, 120))), '2024-02-29T23:00:00.120000Z');
  });

  it('writes an empty message with every default, and UNSPECIFIED enums as null', () => {
    const codec = messageType(thingType);
    const json = messageToJson(thingType, codec.decode(codec.encode({})));
    assert.deepEqual(json, {
      id: '',
      amount: 0,
      ratio: 0,
      flag: false,
      kind: null,
      stages: [],
      counts: {},
      by_number: {},
      metadata: null,
      anything: null,
      list: null,
      at: null,
      note: null,
      alias: null,
      url: null,
      port: null,
      tags: [],
      small: 0,
      label: null,
      blob: '',
    });
  });

  it('round-trips every kind of field', () => {
    const input = {
      id: 'i',
      amount: 12_345_678_901,
      ratio: 0.25,
      flag: true,
      kind: 'small',
      stages: [
        { name: 'a', confidence: 0.5, display_order: 1 },
        { name: 'b', display_order: 2 },
      ],
      counts: { a: 1 },
      by_number: { '7': 'seven' },
      metadata: { nested: { deep: [1, null, 'x'] } },
      anything: [1, { a: true }],
      list: ['x', 2, null],
      at: '2026-11-22T10:00:00.123456Z',
      note: '',
      alias: 'al',
      port: 8080,
      tags: ['t'],
      small: 3,
      label: { text: 'hello', color: '' },
      blob: Buffer.from('hi').toString('base64'),
    };
    assert.deepEqual(roundTrip(thingType, input), {
      ...input,
      stages: [
        { name: 'a', confidence: 0.5, display_order: 1 },
        { name: 'b', confidence: null, display_order: 2 },
      ],
      at: '2026-11-22T10:00:00.123000Z', // milliseconds: ts-proto, as every service, holds Timestamps as Dates
      url: null,
    });
  });

  it("maps a handler's object as the bytes it becomes would map: event data and responses agree", () => {
    const thing: Thing = {
      ...Thing.fromPartial({}),
      id: 'i',
      amount: 7,
      kind: 2,
      stages: [{ name: 's', confidence: undefined, display_order: 1 }],
      metadata: { kept: 1, dropped: undefined, nested: { at: [1, undefined, 'x'] } },
      anything: undefined,
      list: [null, undefined, true],
      at: new Date('2026-11-22T10:00:00.001Z'),
      note: undefined,
      alias: '',
      target: { $case: 'port', value: 9 },
      label: { text: 't', color: 'c' },
      blob: Buffer.from('b'),
    };
    const direct = messageToJson(thingType, thing);
    assert.deepEqual(direct, messageToJson(thingType, Thing.decode(Thing.encode(thing).finish())));
    assert.deepEqual((direct as Record<string, unknown>).metadata, { kept: 1, nested: { at: [1, null, 'x'] } });
    assert.deepEqual((direct as Record<string, unknown>).list, [null, null, true]);
  });

  it("decodes a response nesting the API's deepest JSON a few levels down (a webhook event's payload)", () => {
    let deep: Record<string, unknown> = { leaf: 'bottom' };
    for (let i = 0; i < 36; i++) deep = { [`level_${i}`]: deep };
    const codec = messageType(memberType);
    const bytes = Member.encode({ ...Member.fromPartial({}), metadata: deep }).finish();
    assert.throws(() => Member.decode(bytes), /recursion limit/, "ts-proto's own limit: 100 nested messages");
    assert.deepEqual((messageToJson(memberType, codec.decode(bytes)) as Record<string, unknown>).metadata, deep);
  });
});
