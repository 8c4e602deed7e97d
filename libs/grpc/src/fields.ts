/**
 * Request-field helpers every service's handlers share (proto request → row patch and checks),
 * added to one Validator so a request's problems come back together.
 */
import type { Validator } from './validate.js';

/**
 * The JSON size limit of every `metadata` object (free-form, bounded). Protos state it as
 * `(workauto.api.v1.max_json_bytes)`, checked with the field rules; this is for a request whose
 * proto does not state it yet.
 */
export const METADATA_MAX_BYTES = 16_384;

export function checkMetadata(v: Validator, field: string, value: Record<string, unknown> | undefined): Validator {
  return value !== undefined && Buffer.byteLength(JSON.stringify(value)) > METADATA_MAX_BYTES
    ? v.add(field, `must be at most ${METADATA_MAX_BYTES} bytes of JSON`)
    : v;
}

/** A proto enum field: 0 (unset) is allowed unless required; a number outside the enum never is. */
export function checkEnum(
  v: Validator,
  field: string,
  value: number | undefined,
  mapping: { toDomain(n: number | undefined): string | undefined; names: string[] },
  required: boolean,
): Validator {
  if (value === undefined || value === 0)
    return required ? v.add(field, `is required: one of ${mapping.names.join(', ')}`) : v;
  return mapping.toDomain(value) === undefined ? v.add(field, `must be one of ${mapping.names.join(', ')}`) : v;
}

/**
 * The years event and task times may fall in (a date's year, an instant's UTC year). Outside
 * them, zones' local times reach years clients cannot read (10000, 0000) or local mean time.
 */
export const YEARS = { min: 1900, max: 2999 } as const;

/** Trimmed text, or null for an empty string (the API's way to clear an optional text field). */
export function textOrNull(value: string | undefined): string | null | undefined {
  if (value === undefined) return undefined;
  const t = value.trim();
  return t === '' ? null : t;
}

/** The fields a patch sets, for an event's metadata. */
export function changedFields(patch: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
}

// C0 and C1 controls, DEL, and Unicode whitespace: the WHATWG URL parser drops tabs and newlines
// silently, so a URL that parses can still carry them in the text that was stored.
// eslint-disable-next-line no-control-regex -- matching control characters is the point: they are refused
const URL_FORBIDDEN_CHARACTERS = /[\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]/;

/** Why a URL's text is refused before it is parsed: whitespace or control characters, anywhere. */
export function urlTextProblem(value: string): string | undefined {
  return URL_FORBIDDEN_CHARACTERS.test(value)
    ? 'must not contain whitespace or control characters; percent-encode them (a space is %20)'
    : undefined;
}

/**
 * The `return_to` of a browser round trip (an OAuth consent, identity's or an app's): an absolute
 * URL on an origin of OAUTH_ALLOWED_RETURN_ORIGINS, so the flow never sends a browser anywhere
 * else (no open redirect), and without whitespace or control characters, which the URL parser
 * would drop while the stored text kept them for the final redirect.
 */
export function checkReturnTo(
  v: Validator,
  field: string,
  value: string,
  allowedOrigins: readonly string[],
): Validator {
  const problem = urlTextProblem(value);
  if (problem) return v.add(field, problem);
  const origin = URL.parse(value)?.origin;
  return origin !== undefined && allowedOrigins.includes(origin)
    ? v
    : v.add(
        field,
        `must be a URL on an allowed origin (${allowedOrigins.join(', ') || 'none configured: set OAUTH_ALLOWED_RETURN_ORIGINS'})`,
      );
}

/** Where a browser round trip ends: its return_to with the outcome's query parameters set. */
export function returnToWith(returnTo: string, params: Record<string, string>): { location: string } {
  const url = new URL(returnTo);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return { location: url.href };
}
