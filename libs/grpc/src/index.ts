export {
  DomainError,
  accessDenied,
  errors,
  toServiceError,
  decodeStatusDetails,
  capViolations,
  violationsMessage,
  MAX_FIELD_VIOLATIONS,
  type ErrorDetails,
  type FieldViolation,
} from './errors.js';
export { CallContext, type Actor } from './context.js';
export { IDEMPOTENT_REPLAYED_KEY, idempotencyScope, idempotencySealInfo, requestFingerprint } from './idempotency.js';
export {
  DOMAINS,
  LEVELS,
  protoAccessLevel,
  allows,
  isAccessLevel,
  isDomain,
  levelAtLeast,
  type AccessLevel,
  type AccessLevels,
  type Domain,
} from './access.js';
export {
  GrpcServer,
  SERVER_CHANNEL_OPTIONS,
  type GrpcServerOptions,
  type Handlers,
  type ServiceDefinition,
  type UnaryServiceDefinition,
} from './server.js';
export { CLIENT_CHANNEL_OPTIONS, Downstream, grpcTarget, type DownstreamOptions, type UnaryMethod } from './client.js';
export { installShutdownSignals } from './signals.js';
export { validate, Validator, isIsoDate, patchNulls } from './validate.js';
export { enumMapping } from './enums.js';
export {
  parsePage,
  toPage,
  timestampCursor,
  PAGE_MAX_BYTES,
  type CursorCodec,
  type FetchedPage,
  type Page,
  type PageRequest,
} from './pagination.js';
export { encodedSizeBound } from './message-size.js';
export { httpBodyChunks, httpBodyHeaders } from './http-body.js';
export { Resources } from './resources.js';
export {
  checkMetadata,
  checkEnum,
  YEARS,
  urlTextProblem,
  textOrNull,
  changedFields,
  checkReturnTo,
  returnToWith,
  METADATA_MAX_BYTES,
} from './fields.js';
export {
  CallerSigner,
  CallerVerifier,
  CALLER_TOKEN_KEY,
  callerAudience,
  generateCallerKeys,
  mergeVerifyKeys,
  type Caller,
  type CallerKeys,
} from './caller-identity.js';
