export { startEmbeddedPostgres, freePort, type EmbeddedPostgresHandle } from './postgres.js';
export { testDatabase } from './database.js';
export { captureLogs } from './logs.js';
export { callAs, failure, testCallerKeys, testSigner, TestClient, type TestCallOptions } from './grpc.js';
