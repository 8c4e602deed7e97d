import { errors } from '@workauto/grpc';

/**
 * Most active (unrevoked) API keys one member may hold. Each key has its own rate limit, so
 * unbounded keys would multiply it; 25 leaves room for a key per machine, script and integration.
 */
const MAX_ACTIVE_API_KEYS = 25;

export function assertMayAddApiKey(activeKeys: number): void {
  if (activeKeys >= MAX_ACTIVE_API_KEYS) {
    throw errors.failedPrecondition(
      'API_KEY_LIMIT_REACHED',
      `this member already has ${MAX_ACTIVE_API_KEYS} active API keys, the most allowed; revoke one it no longer uses first`,
    );
  }
}
