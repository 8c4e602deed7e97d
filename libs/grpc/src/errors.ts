import * as grpc from '@grpc/grpc-js';
import { TenantShareBusyError, isConcurrencyFailure, isDatabaseUnavailable } from '@workauto/db';
import { Any } from '@workauto/protos/google/protobuf/any.js';
import { BadRequest, ErrorInfo } from '@workauto/protos/google/rpc/error_details.js';
import { Status } from '@workauto/protos/google/rpc/status.js';
import type { AccessLevel, Domain } from './access.js';

export interface FieldViolation {
  field: string;
  description: string;
}

export interface ErrorDetails {
  code: grpc.status;
  message: string;
  reason: string;
  domain: string;
  metadata: Record<string, string>;
  fieldViolations: FieldViolation[];
  /** An HTTP status docs/api.md §5 sets apart from the code's default (410 for an expired invitation). */
  httpStatus?: number;
}

/**
 * Field violations sent with one error: past this, one "… and N more" entry. Hundreds of them
 * overflow the status trailer (HTTP/2 header limits) and the client gets a 500 instead of its 400.
 */
export const MAX_FIELD_VIOLATIONS = 50;

/** At most MAX_FIELD_VIOLATIONS violations, then one entry saying how many were left out. */
export function capViolations(violations: FieldViolation[]): FieldViolation[] {
  if (violations.length <= MAX_FIELD_VIOLATIONS) return violations;
  if (violations.length === MAX_FIELD_VIOLATIONS + 1 && violations[MAX_FIELD_VIOLATIONS]!.field === MORE_VIOLATIONS)
    return violations; // capped already
  const more = violations.length - MAX_FIELD_VIOLATIONS;
  return [
    ...violations.slice(0, MAX_FIELD_VIOLATIONS),
    {
      field: MORE_VIOLATIONS,
      description: `… and ${more} more violations; fix the ones listed and send the request again to see the rest`,
    },
  ];
}
const MORE_VIOLATIONS = '(more)';

/**
 * An INVALID_ARGUMENT's message: each violation as `field: description`, fields with the same
 * description together (`nam, colour: is not a field of …; its fields are …`), so a long
 * description (the fields a message has) is said once.
 */
export function violationsMessage(violations: FieldViolation[]): string {
  const fields = new Map<string, string[]>();
  for (const v of capViolations(violations))
    (fields.get(v.description) ?? fields.set(v.description, []).get(v.description)!).push(v.field);
  return [...fields].map(([description, names]) => `${names.join(', ')}: ${description}`).join('; ');
}

const STATUS_DETAILS_KEY = 'grpc-status-details-bin';
const HTTP_STATUS_KEY = 'workauto-http-status';
const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';
const BAD_REQUEST_TYPE = 'type.googleapis.com/google.rpc.BadRequest';

/**
 * The one error type handlers throw. The server kit maps it once to a gRPC status carrying
 * google.rpc.ErrorInfo (and BadRequest for field violations); anything else becomes INTERNAL.
 */
export class DomainError extends Error {
  override name = 'DomainError';
  constructor(
    readonly code: grpc.status,
    readonly reason: string,
    message: string,
    readonly extra: {
      metadata?: Record<string, string>;
      fieldViolations?: FieldViolation[];
      httpStatus?: number;
      domain?: string;
    } = {},
  ) {
    super(message);
  }
}

/** Constructors for the conditions of the error table of docs/api.md §5. */
export const errors = {
  notFound: (resource: string, id: string) =>
    new DomainError(
      grpc.status.NOT_FOUND,
      `${resource.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}_NOT_FOUND`,
      `${resource.replace(/_/g, ' ')} ${id} not found`,
      {
        metadata: { [`${resource}_id`]: id },
      },
    ),
  invalidArgument: (violations: FieldViolation[], message?: string) =>
    new DomainError(grpc.status.INVALID_ARGUMENT, 'INVALID_ARGUMENT', message ?? violationsMessage(violations), {
      fieldViolations: capViolations(violations),
    }),
  invalidField: (field: string, description: string) =>
    new DomainError(grpc.status.INVALID_ARGUMENT, 'INVALID_ARGUMENT', `${field}: ${description}`, {
      fieldViolations: [{ field, description }],
    }),
  alreadyExists: (reason: string, message: string, metadata?: Record<string, string>) =>
    new DomainError(grpc.status.ALREADY_EXISTS, reason, message, metadata ? { metadata } : {}),
  /** A state conflict: 409, or 410 for something that expired or was revoked. */
  failedPrecondition: (reason: string, message: string, httpStatus: 409 | 410 = 409) =>
    new DomainError(grpc.status.FAILED_PRECONDITION, reason, message, { httpStatus }),
  permissionDenied: (reason: string, message: string, metadata?: Record<string, string>) =>
    new DomainError(grpc.status.PERMISSION_DENIED, reason, message, metadata ? { metadata } : {}),
  unauthenticated: (reason: string, message: string) => new DomainError(grpc.status.UNAUTHENTICATED, reason, message),
  /** 503; metadata names what was unavailable (e.g. the app whose server failed). */
  unavailable: (reason: string, message: string, metadata?: Record<string, string>) =>
    new DomainError(grpc.status.UNAVAILABLE, reason, message, metadata ? { metadata } : {}),
};

/** A handler's failure as the DomainError it is answered with: database conditions by SQLSTATE, anything else a bare INTERNAL. */
export function asDomainError(err: unknown): DomainError {
  return err instanceof DomainError ? err : fromDatabaseError(err);
}

/** Builds the grpc-js error a handler's failure is sent as. Unknown errors become a bare INTERNAL. */
export function toServiceError(err: unknown, domain: string): Partial<grpc.ServiceError> {
  const known = asDomainError(err);
  const details: Any[] = [
    {
      type_url: ERROR_INFO_TYPE,
      value: Buffer.from(
        ErrorInfo.encode({
          reason: known.reason,
          domain: known.extra.domain ?? domain,
          metadata: known.extra.metadata ?? {},
        }).finish(),
      ),
    },
  ];
  if (known.extra.fieldViolations?.length) {
    details.push({
      type_url: BAD_REQUEST_TYPE,
      value: Buffer.from(
        BadRequest.encode({
          field_violations: capViolations(known.extra.fieldViolations).map((v) => ({ ...v, reason: '' })),
        }).finish(),
      ),
    });
  }
  const metadata = new grpc.Metadata();
  metadata.set(
    STATUS_DETAILS_KEY,
    Buffer.from(Status.encode({ code: known.code, message: capMessage(known.message), details }).finish()),
  );
  if (known.extra.httpStatus) metadata.set(HTTP_STATUS_KEY, String(known.extra.httpStatus));
  return { code: known.code, details: capMessage(known.message), metadata };
}

/** A message fits the trailer too (one built from many violations can be long). */
function capMessage(message: string): string {
  return message.length > 2_000 ? `${message.slice(0, 2_000)}…` : message;
}

/** The DomainError of a failure that is not one: database conditions by SQLSTATE, else a bare INTERNAL. */
function fromDatabaseError(err: unknown): DomainError {
  if (err instanceof TenantShareBusyError) {
    // The tenant's own queue for its share of the pool (@workauto/db): too many requests of that
    // tenant, which pass as they finish. Never "the database is unavailable", which would count
    // against the service's circuit for every tenant.
    return new DomainError(grpc.status.RESOURCE_EXHAUSTED, 'TENANT_DATABASE_BUSY', err.message, {
      metadata: { limit_connections: String(err.share), retry_after_seconds: '1' },
    });
  }
  if (isDatabaseUnavailable(err)) {
    // The database is down or refusing connections: the request may well succeed later.
    return new DomainError(
      grpc.status.UNAVAILABLE,
      'DATABASE_UNAVAILABLE',
      'the service cannot reach its database right now; retry in a few seconds',
    );
  }
  if (isConcurrencyFailure(err)) {
    // A deadlock or serialization failure that outlasted withTransaction's retries: nothing was
    // written, and the same request can succeed once the concurrent one is done.
    return new DomainError(
      grpc.status.ABORTED,
      'CONCURRENT_MODIFICATION',
      'the request collided with a concurrent change to the same records and was not applied; retry it',
    );
  }
  if (sqlState(err) === '57014') {
    // statement_timeout: the statement (and its transaction) was cancelled, nothing was written.
    return new DomainError(
      grpc.status.UNAVAILABLE,
      'DATABASE_TIMEOUT',
      'the database did not answer in time and nothing was written; retry in a few seconds',
    );
  }
  if (/^22[0-9A-Z]{3}$/.test(sqlState(err))) {
    // A value the handler should have refused reached SQL (logged as a bug by the server): still
    // the client's input, so a 400 rather than a 500.
    return new DomainError(
      grpc.status.INVALID_ARGUMENT,
      'INVALID_ARGUMENT',
      'a value in the request has the wrong form (ids must be UUIDs, numbers in range); correct it and retry',
    );
  }
  return new DomainError(
    grpc.status.INTERNAL,
    'INTERNAL',
    'internal error; retry later, and report the request id if it persists',
  );
}

function sqlState(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : '';
}

/** Reads the rich details back from a failed call (gateway and service-to-service clients). */
export function decodeStatusDetails(
  // An error a client built itself (a cancelled or timed-out call) may carry no metadata.
  err: Pick<grpc.ServiceError, 'code' | 'details' | 'message'> & { metadata?: grpc.Metadata | undefined },
): ErrorDetails {
  const out: ErrorDetails = {
    code: err.code,
    message: err.details || err.message,
    reason: '',
    domain: '',
    metadata: {},
    fieldViolations: [],
  };
  const bin = err.metadata?.get(STATUS_DETAILS_KEY)[0];
  if (Buffer.isBuffer(bin)) {
    try {
      const status = Status.decode(bin);
      out.message = status.message || out.message;
      for (const any of status.details) {
        if (any.type_url === ERROR_INFO_TYPE) {
          const info = ErrorInfo.decode(any.value);
          out.reason = info.reason;
          out.domain = info.domain;
          out.metadata = info.metadata;
        } else if (any.type_url === BAD_REQUEST_TYPE) {
          out.fieldViolations = BadRequest.decode(any.value).field_violations.map((v) => ({
            field: v.field,
            description: v.description,
          }));
        }
      }
    } catch {
      // A peer that sends malformed details still has its code and message.
    }
  }
  const http = err.metadata?.get(HTTP_STATUS_KEY)[0];
  if (typeof http === 'string' && /^\d{3}$/.test(http)) out.httpStatus = Number(http);
  return out;
}

/** 403 ACCESS_DENIED in the gateway's words, for a rule a service checks itself. */
export function accessDenied(domain: Domain, need: AccessLevel, have: AccessLevel, what: string) {
  return errors.permissionDenied(
    'ACCESS_DENIED',
    `${what} needs ${need} access to ${domain}; your access there is ${have}. Ask an admin to change your role or access policy`,
    { domain, required_level: need, actual_level: have },
  );
}
