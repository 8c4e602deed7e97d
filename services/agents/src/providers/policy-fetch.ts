/**
 * The fetch the provider SDKs get: libs/egress's fetchWhole, which reads each answer whole through
 * undici's request API at about 60 % of the global fetch's CPU per call (docs/benchmarks.md, "Agent
 * runs"). For a tenant's base_url it is the tenant policy's, so a name that resolves to an address
 * the policy refuses is refused when the SDK connects (not only when the URL was written); for the
 * platform's URL, the operator's policy, which allows any address. Either way redirects are never
 * followed and an answer is read up to a bound (a tenant's server may answer anything).
 */
import type { EgressPolicy } from '@workauto/egress';

/** The most of a provider's answer read: a chat answer or a model list is far smaller. */
const PROVIDER_RESPONSE_MAX_BYTES = 8 * 1024 * 1024;

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export function policyFetch(egress: EgressPolicy, timeoutMs: number): Fetch {
  return (input, init) => {
    // The SDKs pass the URL as a string; a Request would carry settings this wrapper does not look at.
    if (input instanceof Request) throw new TypeError('policyFetch takes a URL, not a Request');
    const { redirect: _ignored, ...rest } = init ?? {}; // never followed (the policy's rule)
    return egress.fetchWhole(input, {
      ...rest,
      // The SDK's own timeout (an AbortSignal) ends the call first; this one bounds the body as well.
      timeoutMs: timeoutMs + 1_000,
      maxResponseBytes: PROVIDER_RESPONSE_MAX_BYTES,
    });
  };
}
