export { DomainError, errors, toServiceError, decodeStatusDetails, type ErrorDetails, type FieldViolation } from './errors.js';
export { CallContext, MetadataKeys, type Actor } from './context.js';
export { GrpcServer, type GrpcServerOptions, type Handlers, type UnaryServiceDefinition } from './server.js';
export { Downstream, type DownstreamOptions, type UnaryMethod } from './client.js';
export { installShutdownSignals } from './signals.js';
export { validate, Validator, isIsoDate, patchNulls } from './validate.js';
export { enumMapping } from './enums.js';
export { parsePage, toPage, encodeCursor, type Page, type PageRequest } from './pagination.js';
export { Resources } from './resources.js';
