/**
 * An app's credential (contract §5 "Apps"): none, bearer (`Authorization: Bearer <secret>`) or
 * header (`<auth_header_name>: <secret>`). Pure: what a valid one is and the headers it becomes.
 */
import type { Validator } from '@workauto/grpc';

export type AuthType = 'none' | 'bearer' | 'header';

export interface AuthInput {
  type: AuthType;
  secret: string | null;
  headerName: string | null;
}

const SECRET_MIN = 8;
const SECRET_MAX = 4_096;
export const SLUG = /^[a-z][a-z0-9-]{1,62}$/;

// RFC 9110 token characters.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
/** Headers the MCP transports set themselves, or that would change how the request is framed. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'transfer-encoding',
  'connection',
  'upgrade',
  'te',
  'trailer',
  'accept',
  'accept-encoding',
  'keep-alive',
  'proxy-connection',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'cookie',
]);
// A header value: visible ASCII and spaces, no control characters (CR/LF would split the request).
const HEADER_VALUE = /^[\x20-\x7e]+$/;

/**
 * Checks an auth object whose type was already mapped from the enum (undefined when absent or
 * unspecified); `field` is its name in the request (`auth`). Returns the normalised input.
 */
export function checkAuth(
  v: Validator,
  field: string,
  auth: { type: AuthType | undefined; secret?: string | undefined; header_name?: string | undefined } | undefined,
  opts: { allowNone: boolean },
): AuthInput {
  if (!auth) return { type: 'none', secret: null, headerName: null };
  const type = auth.type ?? (opts.allowNone ? 'none' : undefined);
  if (type === undefined) {
    v.add(`${field}.type`, 'is required: bearer or header');
    return { type: 'none', secret: null, headerName: null };
  }
  if (type === 'none') {
    if (!opts.allowNone) v.add(`${field}.type`, 'must be bearer or header (a rotation sets a new secret)');
    if (auth.secret !== undefined && auth.secret !== '') v.add(`${field}.secret`, 'must be absent when type is none');
    if (auth.header_name !== undefined && auth.header_name !== '')
      v.add(`${field}.header_name`, 'must be absent when type is none');
    return { type, secret: null, headerName: null };
  }
  const secret = auth.secret ?? '';
  if (secret.length < SECRET_MIN || secret.length > SECRET_MAX)
    v.add(`${field}.secret`, `is required for type ${type}: ${SECRET_MIN} to ${SECRET_MAX} characters`);
  else if (!HEADER_VALUE.test(secret) || secret !== secret.trim())
    v.add(
      `${field}.secret`,
      'must be printable ASCII without leading or trailing spaces (it is sent in an HTTP header)',
    );
  let headerName: string | null = null;
  if (type === 'header') {
    headerName = auth.header_name ?? '';
    if (!HEADER_NAME.test(headerName))
      v.add(
        `${field}.header_name`,
        'is required for type header: an HTTP header name such as X-Api-Key (letters, digits, - and _; at most 64)',
      );
    else if (RESERVED_HEADERS.has(headerName.toLowerCase()))
      v.add(
        `${field}.header_name`,
        `${headerName} is set by the MCP transport itself; choose another header (e.g. X-Api-Key), or type bearer for Authorization`,
      );
    else if (headerName.toLowerCase() === 'authorization')
      v.add(`${field}.header_name`, 'use type bearer for the Authorization header');
  } else if (auth.header_name !== undefined && auth.header_name !== '') {
    v.add(`${field}.header_name`, 'is only for type header');
  }
  return { type, secret, headerName };
}

/** The headers that carry a credential on every request to the app's server. */
export function authHeaders(type: AuthType, secret: string | null, headerName: string | null): Record<string, string> {
  if (type === 'bearer' && secret) return { Authorization: `Bearer ${secret}` };
  if (type === 'header' && secret && headerName) return { [headerName]: secret };
  return {};
}
