/** The error shape of docs/api.md §5, and gRPC status → HTTP as grpc-gateway maps it (with that section's overrides). */
import * as grpc from '@grpc/grpc-js';
import { DomainError, capViolations, decodeStatusDetails, violationsMessage, type ErrorDetails } from '@workauto/grpc';

export const GATEWAY_DOMAIN = 'gateway.workauto';

const HTTP_BY_CODE: Record<number, number> = {
  [grpc.status.OK]: 200,
  [grpc.status.CANCELLED]: 499,
  [grpc.status.UNKNOWN]: 500,
  [grpc.status.INVALID_ARGUMENT]: 400,
  [grpc.status.DEADLINE_EXCEEDED]: 504,
  [grpc.status.NOT_FOUND]: 404,
  [grpc.status.ALREADY_EXISTS]: 409,
  [grpc.status.PERMISSION_DENIED]: 403,
  [grpc.status.UNAUTHENTICATED]: 401,
  [grpc.status.RESOURCE_EXHAUSTED]: 429,
  [grpc.status.FAILED_PRECONDITION]: 409, // docs/api.md §5: a state conflict is 409 (or 410, hinted by the service)
  [grpc.status.ABORTED]: 409,
  [grpc.status.OUT_OF_RANGE]: 400,
  [grpc.status.UNIMPLEMENTED]: 501,
  [grpc.status.INTERNAL]: 500,
  [grpc.status.UNAVAILABLE]: 503,
  [grpc.status.DATA_LOSS]: 500,
};

const GENERIC_MESSAGES: Partial<Record<number, string>> = {
  [grpc.status.UNAVAILABLE]: 'a service behind the gateway is unavailable; retry in a few seconds',
  [grpc.status.DEADLINE_EXCEEDED]: 'a service behind the gateway did not answer in time; retry later',
  [grpc.status.INTERNAL]: 'internal error; retry later, and report the request id if it persists',
  [grpc.status.UNKNOWN]: 'internal error; retry later, and report the request id if it persists',
  [grpc.status.DATA_LOSS]: 'internal error; retry later, and report the request id if it persists',
  [grpc.status.UNIMPLEMENTED]: 'this operation is not implemented by the service behind the gateway',
  [grpc.status.CANCELLED]: 'the call was cancelled',
};

/** An error the gateway itself raises, in the same terms a service would. */
export class GatewayError extends DomainError {
  constructor(
    code: grpc.status,
    reason: string,
    message: string,
    readonly httpStatus?: number,
    extra: {
      fieldViolations?: { field: string; description: string }[];
      headers?: Record<string, string>;
      metadata?: Record<string, string>;
    } = {},
  ) {
    super(code, reason, message, {
      domain: GATEWAY_DOMAIN,
      ...(extra.fieldViolations ? { fieldViolations: extra.fieldViolations } : {}),
      ...(extra.metadata ? { metadata: extra.metadata } : {}),
      ...(httpStatus ? { httpStatus } : {}),
    });
    this.headers = extra.headers ?? {};
  }
  readonly headers: Record<string, string>;
}

export interface HttpError {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

function isServiceError(err: unknown): err is grpc.ServiceError {
  return (
    typeof err === 'object' && err !== null && typeof (err as grpc.ServiceError).code === 'number' && 'metadata' in err
  );
}

/** Retry-After of a 503 or 429 that names no time of its own: overload, outages and busy shares pass in about this long. */
const RETRY_AFTER_SECONDS = '1';

/**
 * The seconds a client is told to wait (Retry-After, and `retry_after_seconds` in the error's
 * metadata) before what it waits for is there in `waitMs`: whole seconds, rounded up, at least 1.
 * A limit sets only the metadata; toHttpError writes the header from it.
 */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/** Any failure (a downstream status, a gateway error, a bug) as the API's error response (docs/api.md §5). */
export function toHttpError(err: unknown, requestId: string): HttpError {
  let d: ErrorDetails;
  let headers: Record<string, string> = {};
  if (err instanceof DomainError) {
    d = {
      code: err.code,
      message: err.message,
      reason: err.reason,
      domain: err.extra.domain ?? GATEWAY_DOMAIN,
      metadata: err.extra.metadata ?? {},
      fieldViolations: err.extra.fieldViolations ?? [],
      ...(err.extra.httpStatus ? { httpStatus: err.extra.httpStatus } : {}),
    };
    if (err instanceof GatewayError) headers = err.headers;
  } else if (isServiceError(err)) {
    d = decodeStatusDetails(err);
    if (!d.reason && d.code === grpc.status.RESOURCE_EXHAUSTED) {
      // grpc-js's own RESOURCE_EXHAUSTED: a message over the 4 MiB limit. The same request gets
      // it again, so never a 429 ("retry later"): a 500 that says how to ask for less.
      d = {
        ...d,
        code: grpc.status.INTERNAL,
        reason: 'MESSAGE_TOO_LARGE',
        domain: GATEWAY_DOMAIN,
        message:
          'the answer (or the request) was larger than the 4 MiB a service exchanges at once; ask for less per request (a smaller limit, narrower filters) and report the request id',
      };
    } else if (!d.reason) {
      // A status without details comes from grpc-js itself (service down, deadline, a broken
      // message): its text names addresses and internals, so the client gets a fixed message.
      d.reason = statusName(d.code);
      d.domain = GATEWAY_DOMAIN;
      d.message = GENERIC_MESSAGES[d.code] ?? d.message;
    } else if (d.reason === 'CALLER_IDENTITY_INVALID') {
      // A service refused the gateway's own signature: a key misconfiguration, not the client's credential.
      d = {
        ...d,
        code: grpc.status.INTERNAL,
        domain: GATEWAY_DOMAIN,
        metadata: {},
        message:
          "a service refused the gateway's caller identity; an operator must check CALLER_SIGNING_KEY and the services' CALLER_VERIFY_KEYS (report the request id)",
      };
    }
  } else {
    d = {
      code: grpc.status.INTERNAL,
      message: 'internal error; retry later, and report the request id if it persists',
      reason: 'INTERNAL',
      domain: GATEWAY_DOMAIN,
      metadata: {},
      fieldViolations: [],
    };
  }
  const status = d.httpStatus ?? HTTP_BY_CODE[d.code] ?? 500;
  if (status === 401) headers = { ...headers, 'WWW-Authenticate': 'Bearer' };
  // A 503 is shed load or a service away for a moment, a 429 a limit that passes (a service's
  // own, such as a tenant's share of its connections): the client is told when to come back.
  if ((status === 503 || status === 429) && !headers['Retry-After'])
    headers = { ...headers, 'Retry-After': d.metadata.retry_after_seconds ?? RETRY_AFTER_SECONDS };
  const details: unknown[] = [
    { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: d.reason, domain: d.domain, metadata: d.metadata },
  ];
  if (d.fieldViolations.length)
    details.push({ '@type': 'type.googleapis.com/google.rpc.BadRequest', field_violations: d.fieldViolations });
  return {
    status,
    headers,
    body: {
      error: {
        code: status,
        status: statusName(d.code),
        message: d.message,
        details,
        request_id: requestId,
      },
    },
  };
}

export const gatewayErrors = {
  badRequest: (violations: { field: string; description: string }[], message?: string) => {
    const listed = capViolations(violations);
    return new GatewayError(
      grpc.status.INVALID_ARGUMENT,
      'INVALID_ARGUMENT',
      message ?? violationsMessage(listed),
      undefined,
      { fieldViolations: listed },
    );
  },
  unauthenticated: (message: string) => new GatewayError(grpc.status.UNAUTHENTICATED, 'UNAUTHENTICATED', message),
  forbidden: (message: string, reason = 'ACCESS_DENIED', metadata?: Record<string, string>) =>
    new GatewayError(grpc.status.PERMISSION_DENIED, reason, message, undefined, metadata ? { metadata } : {}),
  routeNotFound: (method: string, path: string) =>
    new GatewayError(
      grpc.status.NOT_FOUND,
      'ROUTE_NOT_FOUND',
      `no route ${method} ${path}; see /api/v1/openapi.json for the API's routes`,
    ),
  methodNotAllowed: (method: string, allowed: string[]) =>
    new GatewayError(
      grpc.status.UNIMPLEMENTED,
      'METHOD_NOT_ALLOWED',
      `${method} is not allowed here; use ${allowed.join(' or ')}`,
      405,
      { headers: { Allow: allowed.join(', ') } },
    ),
  unavailable: (message: string) => new GatewayError(grpc.status.UNAVAILABLE, 'SERVICE_UNAVAILABLE', message),
  /** A service this deployment runs without: no retry helps, only an operator (501, not 503). */
  notConfigured: (service: string, variable: string) =>
    new GatewayError(
      grpc.status.UNIMPLEMENTED,
      'SERVICE_NOT_CONFIGURED',
      `this deployment runs without the ${service} service; an operator must set ${variable} on the gateway`,
      501,
      { metadata: { service } },
    ),
};

/** The gRPC status name of a code; a code grpc-js does not know (a newer peer's) is UNKNOWN. */
function statusName(code: grpc.status): string {
  // A reverse enum lookup answers undefined for a code it lacks, though its type says string.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
  return grpc.status[code] ?? 'UNKNOWN';
}
