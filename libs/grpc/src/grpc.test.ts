import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { decodeStatusDetails, errors, toServiceError } from './errors.js';
import { parsePage, toPage } from './pagination.js';
import { validate } from './validate.js';
import { enumMapping } from './enums.js';

describe('error mapping', () => {
  it('carries reason, domain, field violations and the HTTP hint through grpc-status-details-bin', () => {
    const sent = toServiceError(errors.invalidField('stages[1].name', 'is required'), 'crm.workauto') as grpc.ServiceError;
    const got = decodeStatusDetails(sent);
    assert.equal(got.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(got.reason, 'INVALID_ARGUMENT');
    assert.equal(got.domain, 'crm.workauto');
    assert.deepEqual(got.fieldViolations, [{ field: 'stages[1].name', description: 'is required' }]);
    const gone = decodeStatusDetails(toServiceError(errors.failedPrecondition('INVITATION_EXPIRED', 'expired', 410), 'identity.workauto') as grpc.ServiceError);
    assert.equal(gone.httpStatus, 410);
  });

  it('turns an unexpected error into INTERNAL without its message', () => {
    const got = decodeStatusDetails(toServiceError(new Error('password=hunter2 at db.ts:12'), 'x') as grpc.ServiceError);
    assert.equal(got.code, grpc.status.INTERNAL);
    assert.equal(got.message.includes('hunter2'), false);
  });

  it('turns a PostgreSQL data exception (bad input that reached SQL) into INVALID_ARGUMENT, not a 500', () => {
    const pgError = Object.assign(new Error('invalid input syntax for type uuid: ""'), { code: '22P02' });
    const got = decodeStatusDetails(toServiceError(pgError, 'x') as grpc.ServiceError);
    assert.equal(got.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(got.message.includes('uuid: ""'), false);
    const down = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    assert.equal(decodeStatusDetails(toServiceError(down, 'x') as grpc.ServiceError).code, grpc.status.UNAVAILABLE, 'a database that went away is a 503');
    const other = Object.assign(new Error('deadlock detected'), { code: '40P01' });
    assert.equal(decodeStatusDetails(toServiceError(other, 'x') as grpc.ServiceError).code, grpc.status.INTERNAL);
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

  it('builds an envelope whose cursor continues after the last item', () => {
    const rows = [3, 2, 1].map((n) => ({ id: `id${n}`, created_at: new Date(Date.UTC(2026, 0, n)) }));
    const page = toPage(rows, 2, (r) => r.id);
    assert.deepEqual(page.data, ['id3', 'id2']);
    assert.equal(page.has_more, true);
    assert.deepEqual(parsePage({ cursor: page.next_cursor }).after, { at: rows[1]!.created_at, id: 'id2' });
    const last = toPage(rows.slice(2), 2, (r) => r.id);
    assert.equal(last.has_more, false);
    assert.equal(last.next_cursor, undefined);
  });
});

describe('validate', () => {
  it('reports every violation at once', () => {
    assert.throws(
      () => validate().uuid('id', 'nope').text('name', '   ', { max: 10 }).email('email', 'a@b').done(),
      (err: { extra: { fieldViolations: { field: string }[] } }) => {
        assert.deepEqual(err.extra.fieldViolations.map((v) => v.field), ['id', 'name', 'email']);
        return true;
      },
    );
    assert.doesNotThrow(() => validate().uuid('id', '0193a6b2-8f5e-7c3a-9b1d-2e4f6a8b0c1d').text('name', 'ok', { max: 10 }).done());
  });
});

describe('enumMapping', () => {
  it('maps proto enum values to lowercase names and back, skipping UNSPECIFIED', () => {
    enum Priority { PRIORITY_UNSPECIFIED = 0, PRIORITY_HIGH = 1, PRIORITY_VERY_LOW = 2 }
    const m = enumMapping(Priority, 'PRIORITY_');
    assert.equal(m.toDomain(Priority.PRIORITY_VERY_LOW), 'very_low');
    assert.equal(m.toDomain(0), undefined);
    assert.equal(m.fromDomain('high'), Priority.PRIORITY_HIGH);
    assert.deepEqual(m.names, ['high', 'very_low']);
  });
});
