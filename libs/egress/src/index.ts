/**
 * The egress policy for outbound calls to URLs that tenants supply (docs/operations.md "Outbound calls to tenant URLs"):
 *
 *   const egress = EgressPolicy.fromEnv();                  // EGRESS_ALLOW_PRIVATE, EGRESS_ALLOWED_CIDRS
 *   const url = egress.checkUrl(body.url, 'url');           // when written: throws the kit's 400
 *   const res = await egress.fetch(url, { method: 'POST', body, timeoutMs: 15_000 });
 *   // fails with EgressRefusedError | EgressTimeoutError | EgressConnectionError; a 3xx is a response;
 *   // { maxResponseBytes } bounds what is read of the body (then EgressResponseTooLargeError)
 *   await egress.close();                                   // on shutdown
 *
 * `egress.fetch` has the global fetch's signature, so it can be handed to clients that take a fetch
 * (the MCP SDK's transports); `egress.request` is the same policy for the product's own hot path
 * (webhook deliveries), at a quarter of fetch's CPU. `reducedUrl(url)` is such a URL as callers below admin see it.
 */
export {
  EgressPolicy,
  egressVars,
  URL_MAX_LENGTH,
  type EgressPolicyOptions,
  type EgressRequestInit,
  type EgressRequestOptions,
  type EgressResponse,
  type Resolver,
  type ResolvedAddress,
} from './policy.js';
export {
  EgressError,
  EgressRefusedError,
  EgressTimeoutError,
  EgressConnectionError,
  EgressResponseTooLargeError,
} from './errors.js';
export { reducedUrl } from './reduced-url.js';
