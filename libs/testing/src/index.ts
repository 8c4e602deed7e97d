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
// The polling helper and the test clocks live in the dependency-free @workauto/retry, so the libraries
// this package depends on reach them too; here they are beside the rest of what tests use.
export { eventually, InstantClock, ManualClock } from '@workauto/retry/testing';
export { stalledRequest } from './stalled-client.js';
export { spawnServerProcess, type ServerProcess } from './process.js';
export { startPrivateKafka, type PrivateKafka } from './kafka.js';
