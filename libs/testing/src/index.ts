export { startEmbeddedPostgres, freePort, type EmbeddedPostgresHandle } from './postgres.js';
export { testDatabase } from './database.js';
export { captureLogs } from './logs.js';
export { callAs, failure, healthStatus } from './grpc.js';
export { eventually } from './eventually.js';
