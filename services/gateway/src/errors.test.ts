import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { DomainError, errors, toServiceError } from '@workauto/grpc';
import { GATEWAY_DOMAIN, gatewayErrors, toHttpError } from './errors.js';

/** A downstream failure as the gateway receives it. */
function fromService(err: DomainError): grpc.ServiceError {
  const e = toServiceError(err, 'identity.workauto');
  return Object.assign(new Error(`${e.code} ${grpc.status[e.code!]}: ${e.details}`), e) as grpc.ServiceError;
}

/** A status grpc-js raises itself: no details, only code and text. */
function bare(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), {
    code,
    details,
    metadata: new grpc.Metadata(),
  });
}

type Body = {
  error: { code: number; status: string; message: string; details: Record<string, unknown>[]; request_id: string };
};

describe('error responses', () => {
  it('have the error shape of docs/api.md §5: code, status, message, ErrorInfo, BadRequest, request_id', () => {
    const http = toHttpError(fromService(errors.invalidField('stages[1].name', 'is required')), 'req-1');
    assert.equal(http.status, 400);
    assert.deepEqual(http.body, {
      error: {
        code: 400,
        status: 'INVALID_ARGUMENT',
        message: 'stages[1].name: is required',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'INVALID_ARGUMENT',
            domain: 'identity.workauto',
            metadata: {},
          },
          {
            '@type': 'type.googleapis.com/google.rpc.BadRequest',
            field_violations: [{ field: 'stages[1].name', description: 'is required' }],
          },
        ],
        request_id: 'req-1',
      },
    });
  });

  it("map gRPC codes as grpc-gateway does, FAILED_PRECONDITION as 409 and the service's hint first", () => {
    const cases: [grpc.status, number][] = [
      [grpc.status.INVALID_ARGUMENT, 400],
      [grpc.status.UNAUTHENTICATED, 401],
      [grpc.status.PERMISSION_DENIED, 403],
      [grpc.status.NOT_FOUND, 404],
      [grpc.status.ALREADY_EXISTS, 409],
      [grpc.status.ABORTED, 409],
      [grpc.status.FAILED_PRECONDITION, 409],
      [grpc.status.OUT_OF_RANGE, 400],
      [grpc.status.RESOURCE_EXHAUSTED, 429],
      [grpc.status.CANCELLED, 499],
      [grpc.status.UNIMPLEMENTED, 501],
      [grpc.status.INTERNAL, 500],
      [grpc.status.UNKNOWN, 500],
      [grpc.status.DATA_LOSS, 500],
      [grpc.status.UNAVAILABLE, 503],
      [grpc.status.DEADLINE_EXCEEDED, 504],
    ];
    for (const [code, status] of cases)
      assert.equal(toHttpError(fromService(new DomainError(code, 'R', 'm')), 'r').status, status, grpc.status[code]);
    const gone = toHttpError(fromService(errors.failedPrecondition('INVITATION_EXPIRED', 'expired', 410)), 'r');
    assert.equal(gone.status, 410);
    assert.equal((gone.body as Body).error.status, 'FAILED_PRECONDITION');
  });

  it('set WWW-Authenticate on every 401', () => {
    assert.equal(
      toHttpError(fromService(errors.unauthenticated('INVALID_CREDENTIAL', 'bad key')), 'r').headers[
        'WWW-Authenticate'
      ],
      'Bearer',
    );
    assert.equal(toHttpError(gatewayErrors.unauthenticated('no key'), 'r').headers['WWW-Authenticate'], 'Bearer');
  });

  it('never pass on what grpc-js or a bug says on a 5xx', () => {
    const down = toHttpError(
      bare(grpc.status.UNAVAILABLE, 'No connection established. Last error: connect ECONNREFUSED 10.0.0.7:50051'),
      'r',
    );
    assert.equal(down.status, 503);
    assert.doesNotMatch(JSON.stringify(down.body), /10\.0\.0\.7|ECONNREFUSED/);
    assert.equal((down.body as Body).error.details[0]!.domain, GATEWAY_DOMAIN);
    const late = toHttpError(
      bare(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded after 5.001s,LB pick: 0.001s'),
      'r',
    );
    assert.equal(late.status, 504);
    assert.equal((late.body as Body).error.status, 'DEADLINE_EXCEEDED');
    const broken = toHttpError(bare(grpc.status.INTERNAL, 'Failed to parse server response'), 'r');
    assert.doesNotMatch(JSON.stringify(broken.body), /parse/);
    const bug = toHttpError(new TypeError("Cannot read properties of undefined (reading 'x')"), 'r');
    assert.equal(bug.status, 500);
    assert.doesNotMatch(JSON.stringify(bug.body), /Cannot read|at |\.ts|\.js/);
  });

  it('never answer 429 (retry later) for a message over the size limit: the same request would get it again', () => {
    const tooLarge = toHttpError(
      bare(grpc.status.RESOURCE_EXHAUSTED, 'Received message larger than max (5242880 vs. 4194304)'),
      'r',
    );
    assert.equal(tooLarge.status, 500);
    assert.equal(tooLarge.headers['Retry-After'], undefined);
    const body = tooLarge.body as Body;
    assert.equal(body.error.details[0]!.reason, 'MESSAGE_TOO_LARGE');
    assert.match(body.error.message, /ask for less/);
    assert.doesNotMatch(body.error.message, /retry/);
    // A service's own RESOURCE_EXHAUSTED (a quota that passes) stays a 429.
    assert.equal(
      toHttpError(fromService(new DomainError(grpc.status.RESOURCE_EXHAUSTED, 'QUOTA', 'm')), 'r').status,
      429,
    );
  });

  it('tell a client when to retry every 503: shed load, a service away, an open circuit', () => {
    const overloaded = toHttpError(
      new DomainError(grpc.status.UNAVAILABLE, 'SERVICE_OVERLOADED', 'the notes_tasks service has 512 calls in flight'),
      'r',
    );
    assert.deepEqual([overloaded.status, overloaded.headers['Retry-After']], [503, '1']);
    const down = toHttpError(bare(grpc.status.UNAVAILABLE, 'No connection established'), 'r');
    assert.deepEqual([down.status, down.headers['Retry-After']], [503, '1']);
    const named = toHttpError(
      new DomainError(grpc.status.UNAVAILABLE, 'IDP_UNAVAILABLE', 'the identity provider is down', {
        metadata: { retry_after_seconds: '30' },
      }),
      'r',
    );
    assert.equal(named.headers['Retry-After'], '30');
    assert.equal(toHttpError(bare(grpc.status.INTERNAL, 'boom'), 'r').headers['Retry-After'], undefined);
  });

  it('carry the headers and status of gateway errors (405 Allow, 429 Retry-After)', () => {
    const e = toHttpError(gatewayErrors.methodNotAllowed('PUT', ['GET', 'PATCH']), 'r');
    assert.equal(e.status, 405);
    assert.equal(e.headers.Allow, 'GET, PATCH');
    assert.equal((e.body as Body).error.details[0]!.reason, 'METHOD_NOT_ALLOWED');
  });
});
