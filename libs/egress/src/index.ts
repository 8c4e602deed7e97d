export { EgressPolicy, egressVars, URL_MAX_LENGTH, type EgressPolicyOptions, type EgressRequestInit, type Resolver, type ResolvedAddress } from './policy.js';
export { EgressError, EgressRefusedError, EgressTimeoutError, EgressConnectionError } from './errors.js';
