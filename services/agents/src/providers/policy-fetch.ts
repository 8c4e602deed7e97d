/**
 * The fetch the provider SDKs get for a tenant's base_url: libs/egress's policy, so a name that
 * resolves to an address the policy refuses is refused when the SDK connects (not only when the
 * URL was written), redirects are never followed, and an answer is read up to a bound (the server
 * is the tenant's, and may answer anything).
 */
import type { EgressPolicy } from '@workauto/egress';

/** The most of a provider's answer read from a tenant's server: a chat answer or a model list is far smaller. */
const PROVIDER_RESPONSE_MAX_BYTES = 8 * 1024 * 1024;

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export function policyFetch(egress: EgressPolicy, timeoutMs: number): Fetch {
  return (input, init) => {
    // The SDKs pass the URL as a string; a Request would carry settings this wrapper does not look at.
    if (input instanceof Request) throw new TypeError('policyFetch takes a URL, not a Request');
    const { redirect: _ignored, ...rest } = init ?? {}; // never followed (the policy's rule)
    return egress.fetch(input, {
      ...rest,
      // The SDK's own timeout (an AbortSignal) ends the call first; this one bounds the body as well.
      timeoutMs: timeoutMs + 1_000,
      maxResponseBytes: PROVIDER_RESPONSE_MAX_BYTES,
    });
  };
}
