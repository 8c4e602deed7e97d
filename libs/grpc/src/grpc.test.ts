import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { DomainError, decodeStatusDetails, errors, toServiceError } from './errors.js';
import { listCallScope, parsePage, timestampCursor, toPage } from './pagination.js';
import { validate } from './validate.js';
import { enumMapping } from './enums.js';
import { LEVELS, levelAtLeast, protoAccessLevel } from './access.js';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { encodedSizeBound } from './message-size.js';
import { CalendarEvent } from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { fixtures } from '@workauto/protos/fixtures';
import { ThingKind } from '@workauto/protos/fixtures/fixture.js';
import { TenantShareBusyError } from '@workauto/db';

describe('error mapping', () => {
  it('carries reason, domain, field violations and the HTTP hint through grpc-status-details-bin', () => {
    const sent = toServiceError(
      errors.invalidField('stages[1].name', 'is required'),
      'crm.workauto',
    ) as grpc.ServiceError;
    const got = decodeStatusDetails(sent);
    assert.equal(got.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(got.reason, 'INVALID_ARGUMENT');
    assert.equal(got.domain, 'crm.workauto');
    assert.deepEqual(got.fieldViolations, [{ field: 'stages[1].name', description: 'is required' }]);
    const gone = decodeStatusDetails(
      toServiceError(
        errors.failedPrecondition('INVITATION_EXPIRED', 'expired', 410),
        'identity.workauto',
      ) as grpc.ServiceError,
    );
    assert.equal(gone.httpStatus, 410);
  });

  it('turns an unexpected error into INTERNAL without its message', () => {
    const got = decodeStatusDetails(
      toServiceError(new Error('password=hunter2 at db.ts:12'), 'x') as grpc.ServiceError,
    );
    assert.equal(got.code, grpc.status.INTERNAL);
    assert.equal(got.message.includes('hunter2'), false);
  });

  it('turns a PostgreSQL data exception (bad input that reached SQL) into INVALID_ARGUMENT, not a 500', () => {
    const pgError = Object.assign(new Error('invalid input syntax for type uuid: ""'), { code: '22P02' });
    const got = decodeStatusDetails(toServiceError(pgError, 'x') as grpc.ServiceError);
    assert.equal(got.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(got.message.includes('uuid: ""'), false);
    const down = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    assert.equal(
      decodeStatusDetails(toServiceError(down, 'x') as grpc.ServiceError).code,
      grpc.status.UNAVAILABLE,
      'a database that went away is a 503',
    );
    const other = Object.assign(new Error('relation "x" does not exist'), { code: '42P01' });
    assert.equal(decodeStatusDetails(toServiceError(other, 'x') as grpc.ServiceError).code, grpc.status.INTERNAL);
  });

  it("turns a wait for the tenant's own share of the pool into 429 TENANT_DATABASE_BUSY, never the database being unavailable", () => {
    const got = decodeStatusDetails(
      toServiceError(new TenantShareBusyError(5), 'notes_tasks.workauto') as grpc.ServiceError,
    );
    assert.equal(got.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(got.reason, 'TENANT_DATABASE_BUSY');
    assert.equal(got.metadata.retry_after_seconds, '1');
    assert.match(got.message, /this tenant's requests hold all 5 of the database connections.*retry/);
  });

  it('turns a deadlock or serialization failure that outlasted the retries into ABORTED (409) telling the client to retry', () => {
    for (const code of ['40P01', '40001']) {
      const got = decodeStatusDetails(
        toServiceError(Object.assign(new Error('deadlock detected'), { code }), 'crm.workauto') as grpc.ServiceError,
      );
      assert.deepEqual(
        [got.code, got.reason, got.domain],
        [grpc.status.ABORTED, 'CONCURRENT_MODIFICATION', 'crm.workauto'],
      );
      assert.match(got.message, /retry/);
      assert.equal(got.message.includes('deadlock'), false);
    }
    const slow = decodeStatusDetails(
      toServiceError(
        Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
        'x',
      ) as grpc.ServiceError,
    );
    assert.deepEqual([slow.code, slow.reason], [grpc.status.UNAVAILABLE, 'DATABASE_TIMEOUT']);
  });
});

describe('pagination', () => {
  it('defaults to 50, clamps to 200, refuses 0 and foreign cursors', () => {
    assert.equal(parsePage({}).size, 50);
    assert.equal(parsePage({ limit: 1000 }).size, 200);
    assert.throws(() => parsePage({ limit: 0 }), /limit/);
    assert.throws(() => parsePage({ limit: -3 }), /limit/);
    assert.throws(() => parsePage({ cursor: 'not-a-cursor' }), /cursor/);
  });

  it('builds an envelope whose opaque cursor keeps the key at microseconds', () => {
    const id = '0193a6b2-8f5e-7c3a-9b1d-2e4f6a8b0c1d';
    const key = (at: string) => ({ at, id });
    const page = toPage(
      {
        rows: [3, 2],
        keys: [key('2026-01-03T00:00:00.000001Z'), key('2026-01-02T03:04:05.123456Z')],
        next: key('2026-01-02T03:04:05.123456Z'),
      },
      (n) => `n${n}`,
    );
    assert.deepEqual([page.data, page.has_more], [['n3', 'n2'], true]);
    assert.deepEqual(parsePage({ cursor: page.next_cursor }).after, { at: '2026-01-02T03:04:05.123456Z', id });
    const last = toPage({ rows: [1], keys: [key('2026-01-01T00:00:00.000000Z')] }, (n) => n);
    assert.deepEqual([last.has_more, last.next_cursor], [false, undefined]);
    for (const cursor of [
      Buffer.from(JSON.stringify(['2026-01-02', id])).toString('base64url'),
      Buffer.from(JSON.stringify(['2026-01-02T03:04:05.123456Z', 'id2'])).toString('base64url'),
      Buffer.from(JSON.stringify(['2026-01-02T03:04:05.123456Z'])).toString('base64url'),
    ]) {
      assert.throws(() => parsePage({ cursor }), /cursor/);
    }
  });
});

describe('a cursor bound to its list and filters', () => {
  const key = { at: '2026-01-02T03:04:05.123456Z', id: '0193a6b2-8f5e-7c3a-9b1d-2e4f6a8b0c1d' };
  const LIST_NOTES = '/workauto.notes_tasks.v1.NotesTasksService/ListNotes';
  const issued = (path: string, request: Record<string, unknown>) =>
    listCallScope.run({ path, request }, () => toPage({ rows: [1], keys: [key], next: key }, (n) => n)).next_cursor!;
  const read = (path: string, request: Record<string, unknown>) =>
    listCallScope.run({ path, request }, () => parsePage(request as { cursor?: string }));

  it('continues the same list with the same filters, whatever the limit; refuses another list or other filters', () => {
    const cursor = issued(LIST_NOTES, { limit: 1, q: 'kick', archived: false });
    assert.deepEqual(read(LIST_NOTES, { archived: false, q: 'kick', limit: 100, cursor }).after, key);
    for (const [path, request] of [
      ['/workauto.notes_tasks.v1.NotesTasksService/ListTasks', { q: 'kick', archived: false }],
      [LIST_NOTES, { q: 'kick' }],
      [LIST_NOTES, { q: 'kick', archived: true }],
      [LIST_NOTES, { q: 'kick', archived: false, pinned: true }],
    ] as const)
      assert.throws(
        () => read(path, { ...request, cursor }),
        (err: DomainError) => /another list or other filters/.test(err.message) && err.reason === 'INVALID_ARGUMENT',
        `${path} ${JSON.stringify(request)}`,
      );
  });

  it("reads a cursor without a binding (the previous release's), and never binds a timestamp cursor", () => {
    const unbound = toPage({ rows: [1], keys: [key], next: key }, (n) => n).next_cursor!;
    assert.deepEqual(read(LIST_NOTES, { cursor: unbound }).after, key);
    const runs = listCallScope.run({ path: '/runs', request: {} }, () =>
      toPage({ rows: [1], keys: [key], next: key }, (n) => n, timestampCursor),
    );
    assert.equal(runs.next_cursor, key.at);
  });
});

describe('a timestamp cursor (agent runs: the created_at of the last item, next page strictly older)', () => {
  const NO_ID = '00000000-0000-0000-0000-000000000000';
  const after = (cursor: string) => parsePage({ cursor }, timestampCursor).after;

  it('is the key as listPage writes it, both ways', () => {
    const page = toPage(
      {
        rows: [1],
        keys: [{ at: '2026-11-22T10:00:00.123000Z', id: randomUUID() }],
        next: { at: '2026-11-22T10:00:00.123000Z', id: randomUUID() },
      },
      (n) => n,
      timestampCursor,
    );
    assert.equal(page.next_cursor, '2026-11-22T10:00:00.123000Z');
    assert.deepEqual(after(page.next_cursor), { at: '2026-11-22T10:00:00.123000Z', id: NO_ID });
  });

  it('reads any RFC 3339 form in UTC at microseconds, rounding a finer one up (strictly older stays exact)', () => {
    assert.deepEqual(after('2026-11-22T11:00:00+01:00'), { at: '2026-11-22T10:00:00.000000Z', id: NO_ID });
    assert.equal(after('2026-11-22T10:00:00.123456Z')!.at, '2026-11-22T10:00:00.123456Z');
    assert.equal(after('2026-11-22T10:00:00.1234561Z')!.at, '2026-11-22T10:00:00.123457Z');
    assert.equal(after('2026-12-31T23:59:59.9999999Z')!.at, '2027-01-01T00:00:00.000000Z');
  });

  it("refuses anything else with the codec's rule", () => {
    for (const cursor of ['yesterday', '2026-02-30T00:00:00Z', '2026-11-22', 'MjAyNi0xMS0yMg'])
      assert.throws(() => after(cursor), /cursor.*RFC 3339|RFC 3339/);
  });
});

describe('pages under the message size limit', () => {
  const MiB = 1024 * 1024;
  const keyOf = (i: number) => ({
    at: `2026-01-01T00:00:${String(59 - i).padStart(2, '0')}.000000Z`,
    id: randomUUID(),
  });

  it('stops a page early, before its items pass 3 MiB, and continues after the last item sent', () => {
    const rows = Array.from({ length: 5 }, (_, i) => ({ n: i, text: 'x'.repeat(MiB) }));
    const keys = rows.map((r) => keyOf(r.n));
    const page = toPage({ rows, keys }, (r) => ({ title: `item ${r.n}`, description: r.text }));
    assert.deepEqual(
      page.data.map((d) => d.title),
      ['item 0', 'item 1'],
      'a third 1 MiB item would pass 3 MiB',
    );
    assert.equal(page.has_more, true, 'more follow although the rows fetched were all there were');
    assert.deepEqual(parsePage({ cursor: page.next_cursor }).after, keys[1]);
    // Small items are not cut.
    const small = toPage({ rows: rows.map((r) => r.n), keys }, (n) => ({ n }));
    assert.deepEqual([small.data.length, small.has_more], [5, false]);
  });

  it('sends an item larger than the budget alone, one per page', () => {
    const rows = ['y'.repeat(4 * MiB), 'small'];
    const keys = rows.map((_, i) => keyOf(i));
    const page = toPage({ rows, keys }, (text) => ({ text }));
    assert.deepEqual([page.data.length, page.has_more], [1, true]);
    assert.deepEqual(parsePage({ cursor: page.next_cursor }).after, keys[0]);
  });

  it("takes a list's own cursor encoder", () => {
    const page = toPage(
      { rows: ['a', 'b'], keys: [1, 2], next: 2 },
      (s) => s,
      (k) => `k${k}`,
    );
    assert.deepEqual([page.data, page.next_cursor], [['a', 'b'], 'k2']);
  });

  it('bounds the protobuf encoding from above, Struct numbers, negative varints and UTF-8 included', () => {
    const messages: CalendarEvent[] = [
      CalendarEvent.fromPartial({}),
      CalendarEvent.fromPartial({
        id: randomUUID(),
        title: 'Ünterlagen 日本語 \ud83d\ude00 \ud800 lone surrogate',
        sequence: -1,
        location_lat: -0.5,
        location_lng: 1e300,
        start_at: new Date('1900-01-01T00:00:00Z'),
        exdates: Array.from({ length: 50 }, (_, i) => new Date(-2_000_000_000_000 + i)),
        reminders: [{ method: 1, minutes: 40_320 }],
        metadata: {
          n: Array.from({ length: 1_000 }, (_, i) => i % 3),
          nested: { deep: [{ a: null, b: true, c: -1 }], s: 'é'.repeat(100) },
          k: 0,
        },
      }),
    ];
    for (const m of messages) {
      const encoded = CalendarEvent.encode(m).finish().length;
      assert.ok(encodedSizeBound(m) >= encoded, `${encodedSizeBound(m)} >= ${encoded}`);
    }
    // Short strings are bounded, not counted: at three bytes per UTF-16 unit, the most there is.
    for (const text of ['日'.repeat(255), '\ud83d\ude00'.repeat(127), '\ud800'.repeat(255), 'x'.repeat(300)])
      assert.ok(encodedSizeBound(text) >= Buffer.byteLength(text), `${text.length} units`);
  });
});

describe('validate', () => {
  it('reports every violation at once', () => {
    assert.throws(
      () => validate().uuid('id', 'nope').text('name', '   ', { max: 10 }).email('email', 'a@b').done(),
      (err: { extra: { fieldViolations: { field: string }[] } }) => {
        assert.deepEqual(
          err.extra.fieldViolations.map((v) => v.field),
          ['id', 'name', 'email'],
        );
        return true;
      },
    );
    assert.doesNotThrow(() =>
      validate().uuid('id', '0193a6b2-8f5e-7c3a-9b1d-2e4f6a8b0c1d').text('name', 'ok', { max: 10 }).done(),
    );
  });
});

describe('enumMapping', () => {
  it("maps proto enum values to the API's lowercase names and back from the enum's descriptor, skipping UNSPECIFIED", () => {
    const m = enumMapping(ThingKind, fixtures);
    assert.equal(m.toDomain(ThingKind.THING_KIND_BIG_BOX), 'big_box');
    assert.equal(m.toDomain(0), undefined);
    assert.equal(m.toDomain(99), undefined);
    assert.equal(m.fromDomain('small'), ThingKind.THING_KIND_SMALL);
    assert.throws(() => m.fromDomain('unspecified'), /workauto\.fixture\.v1\.ThingKind has no value "unspecified"/);
    assert.deepEqual(m.names, ['big_box', 'small']);
  });

  it('refuses an enum the descriptor set does not hold, saying how to get it there', () => {
    enum Stray {
      STRAY_UNSPECIFIED = 0,
      STRAY_ONE = 1,
    }
    assert.throws(
      () => enumMapping(Stray, fixtures),
      /no enum of the descriptor set has the values STRAY_UNSPECIFIED, STRAY_ONE: rebuild the protos/,
    );
  });
});

describe('access levels', () => {
  it("are workauto.api.v1.AccessLevel's names in its order, lowest first, and map to and from its numbers", () => {
    assert.deepEqual(enumMapping(AccessLevel).names, [...LEVELS]);
    assert.deepEqual(
      [0, AccessLevel.ACCESS_LEVEL_NONE, AccessLevel.ACCESS_LEVEL_WRITE, AccessLevel.ACCESS_LEVEL_ADMIN, 99].map((n) =>
        protoAccessLevel.toLevel(n),
      ),
      ['none', 'none', 'write', 'admin', undefined],
    );
    assert.equal(protoAccessLevel.fromLevel('read'), AccessLevel.ACCESS_LEVEL_READ);
    assert.ok(levelAtLeast('admin', 'write') && levelAtLeast('read', 'read') && !levelAtLeast('read', 'write'));
  });
});
