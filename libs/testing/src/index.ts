export { startEmbeddedPostgres, freePort, type EmbeddedPostgresHandle } from './postgres.js';
export { testDatabase } from './database.js';
export { captureLogs, waitingAttempts } from './logs.js';
export {
  badFields,
  callAs,
  failure,
  newTenant,
  testCallerKeys,
  testSigner,
  TestClient,
  withAccess,
  type TestCallOptions,
} from './grpc.js';
export { healthStatus } from './health.js';
export { eventually } from './eventually.js';
export { ManualClock } from './clock.js';
export { stalledRequest } from './stalled-client.js';
export { spawnServerProcess, type ServerProcess } from './process.js';
export { startPrivateKafka, type PrivateKafka } from './kafka.js';
