/**
 * An app's credential (docs/apps.md "Fields and rules"): none, bearer (`Authorization: Bearer
 * <secret>`), header (`<auth_header_name>: <secret>`) or oauth2 (an access token the service obtains
 * and refreshes; the tenant may give the OAuth client: client_id, and its secret as the secret).
 * Pure: what a valid one is and the headers a static one becomes.
 */
import type { Validator } from '@workauto/grpc';

export type AuthType = 'none' | 'bearer' | 'header' | 'oauth2';

export interface AuthInput {
  type: AuthType;
  /** The secret: a bearer or header value, or an oauth2 app's client_secret. */
  secret: string | null;
  headerName: string | null;
  /** oauth2: the client_id the tenant gave (null: Dynamic Client Registration). */
  clientId: string | null;
  /** oauth2: the scopes to request (null: what the server's metadata lists). */
  scope: string | null;
}

const NO_AUTH: AuthInput = { type: 'none', secret: null, headerName: null, clientId: null, scope: null };

const SECRET_MIN = 8;
const SECRET_MAX = 4_096;
const CLIENT_ID_MAX = 512;
const SCOPE_MAX = 1_000;
// RFC 6749 scope tokens (%x21 / %x23-5B / %x5D-7E), separated by single spaces.
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/;

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
  auth: AuthFields | undefined,
  opts: { allowNone: boolean },
): AuthInput {
  if (!auth) return NO_AUTH;
  const type = auth.type ?? (opts.allowNone ? 'none' : undefined);
  if (type === undefined) {
    v.add(`${field}.type`, 'is required: bearer, header or oauth2');
    return NO_AUTH;
  }
  if (type !== 'oauth2')
    for (const name of ['client_id', 'client_secret', 'scope'] as const)
      if (present(auth[name])) v.add(`${field}.${name}`, 'is only for type oauth2');
  if (type === 'none') {
    if (!opts.allowNone) v.add(`${field}.type`, 'must be bearer, header or oauth2 (a rotation sets a new credential)');
    if (present(auth.secret)) v.add(`${field}.secret`, 'must be absent when type is none');
    if (present(auth.header_name)) v.add(`${field}.header_name`, 'must be absent when type is none');
    return NO_AUTH;
  }
  if (type === 'oauth2') return checkOAuth(v, field, auth);
  const secret = auth.secret ?? '';
  checkSecret(v, `${field}.secret`, secret, `is required for type ${type}`);
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
  } else if (present(auth.header_name)) {
    v.add(`${field}.header_name`, 'is only for type header');
  }
  return { type, secret, headerName, clientId: null, scope: null };
}

/** The auth fields of a request, the type already mapped from the enum (undefined: absent or unspecified). */
export interface AuthFields {
  type: AuthType | undefined;
  secret?: string | undefined;
  header_name?: string | undefined;
  client_id?: string | undefined;
  client_secret?: string | undefined;
  scope?: string | undefined;
}

const present = (value: string | undefined) => value !== undefined && value !== '';

/** A secret sent in a header or a form (a bearer or header value, a client secret). */
function checkSecret(v: Validator, field: string, secret: string, required: string): void {
  if (secret.length < SECRET_MIN || secret.length > SECRET_MAX)
    v.add(field, `${required}: ${SECRET_MIN} to ${SECRET_MAX} characters`);
  else if (!HEADER_VALUE.test(secret) || secret !== secret.trim())
    v.add(field, 'must be printable ASCII without leading or trailing spaces (it is sent in an HTTP header)');
}

/**
 * oauth2: no secret of its own; optionally the client the tenant registered with the server's
 * authorization server (client_id, and client_secret for a confidential client) and the scopes.
 */
function checkOAuth(v: Validator, field: string, auth: AuthFields): AuthInput {
  if (present(auth.secret))
    v.add(`${field}.secret`, "is not used by type oauth2: give the OAuth client's secret as client_secret");
  if (present(auth.header_name)) v.add(`${field}.header_name`, 'is only for type header');
  const clientId = present(auth.client_id) ? auth.client_id! : null;
  if (
    clientId !== null &&
    (clientId.length > CLIENT_ID_MAX || !HEADER_VALUE.test(clientId) || clientId !== clientId.trim())
  )
    v.add(`${field}.client_id`, `must be 1 to ${CLIENT_ID_MAX} printable ASCII characters without surrounding spaces`);
  let secret: string | null = null;
  if (present(auth.client_secret)) {
    if (clientId === null)
      v.add(`${field}.client_secret`, 'needs client_id: the secret belongs to a client the tenant registered');
    secret = auth.client_secret!;
    checkSecret(v, `${field}.client_secret`, secret, 'must be');
  }
  const scope = present(auth.scope) ? auth.scope! : null;
  if (scope !== null && (scope.length > SCOPE_MAX || !SCOPE.test(scope)))
    v.add(
      `${field}.scope`,
      `must be OAuth scopes separated by single spaces (printable ASCII without " or \\), at most ${SCOPE_MAX} characters`,
    );
  return { type: 'oauth2', secret, headerName: null, clientId, scope };
}

/** The headers that carry a credential on every request to the app's server. */
export function authHeaders(type: AuthType, secret: string | null, headerName: string | null): Record<string, string> {
  if (type === 'bearer' && secret) return { Authorization: `Bearer ${secret}` };
  if (type === 'header' && secret && headerName) return { [headerName]: secret };
  return {};
}
