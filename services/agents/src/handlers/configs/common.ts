import { DomainError, validate, type Validator } from '@workauto/grpc';
import { ProviderError, providerOfKey, type ProviderErrorCategory } from '../../providers/index.js';
import { providers as providerNames, type AgentsDeps, type ProviderName } from '../common.js';

// Printable ASCII without spaces: what a provider key is, and what an HTTP header can carry.
const API_KEY = /^[\x21-\x7e]{8,1024}$/;
const API_KEY_RULE = 'must be the provider key: 8 to 1024 printable ASCII characters without spaces';

/**
 * The probe's category as ProbeResult shows it: a request the provider could not serve says nothing
 * about the key either; a redirect means the base_url does not reach the provider (network_error).
 */
export const probeCategory = (c: ProviderErrorCategory) =>
  c === 'bad_request' ? 'provider_unavailable' : c === 'redirected' ? 'network_error' : c;

/** Probes a key (at a tenant's base_url, if given); returns the provider's refusal as a ProviderError, or undefined when the key is valid. */
export async function probe(
  deps: AgentsDeps,
  provider: ProviderName,
  apiKey: string,
  baseUrl: string | null,
  signal: AbortSignal,
): Promise<ProviderError | undefined> {
  try {
    await deps.providers[provider].probe({ apiKey, baseURL: baseUrl ?? undefined }, signal);
    return undefined;
  } catch (err) {
    if (err instanceof ProviderError) return err;
    throw err;
  }
}

/** Why the egress policy refuses a base_url as written (bad form, scheme, whitespace, a refused literal address), if it does. */
export function baseUrlProblem(deps: AgentsDeps, url: string): string | undefined {
  try {
    deps.egress.checkUrl(url, 'base_url');
    return undefined;
  } catch (err) {
    if (err instanceof DomainError) return err.extra.fieldViolations?.[0]?.description ?? err.message;
    throw err;
  }
}

/** An optional base_url field: unset or empty is none. */
export const baseUrlOf = (value: string | undefined): string | null => (value ? value : null);

/** The provider field of a request: undefined when unset (0); a value outside the enum is a violation. */
export function providerField(v: Validator, value: number): ProviderName | undefined {
  if (value !== 0 && providerNames.toDomain(value) === undefined)
    v.add('provider', `must be one of ${providerNames.names.join(', ')}`);
  return providerNames.toDomain(value) as ProviderName | undefined;
}

/** A key request's fields checked; the provider defaults to `fallback` (the config's), else by the key's prefix. */
export function checkKeyRequest(
  deps: AgentsDeps,
  req: { api_key: string; provider: number; base_url?: string | undefined },
  fallback?: ProviderName,
): { provider: ProviderName; baseUrl: string | null } {
  const v = validate().check(API_KEY.test(req.api_key), 'api_key', API_KEY_RULE);
  const provider = providerField(v, req.provider);
  const baseUrl = baseUrlOf(req.base_url);
  const problem = baseUrl === null ? undefined : baseUrlProblem(deps, baseUrl);
  if (problem) v.add('base_url', problem);
  v.done();
  return { provider: provider ?? fallback ?? providerOfKey(req.api_key), baseUrl };
}
