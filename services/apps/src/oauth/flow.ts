/**
 * The requests of an app's OAuth flow, made with the MCP SDK's client-side OAuth functions and a
 * fetch through the egress policy (docs/apps.md "OAuth"): discovery (RFC 9728, then RFC 8414 or
 * OpenID discovery), the consent's start (`auth`: Dynamic Client Registration when needed, PKCE
 * S256, state, the RFC 8707 resource), the code exchange, refreshes, and revocation (RFC 7009, which
 * the SDK has no client for).
 */
import {
  auth,
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  fetchToken,
  parseErrorResponse,
  refreshAuthorization,
  selectClientAuthMethod,
  type OAuthDiscoveryState,
} from '@modelcontextprotocol/sdk/client/auth.js';
import type {
  AuthorizationServerMetadata,
  OAuthClientInformationMixed,
  OAuthProtectedResourceMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { EgressError, EgressRefusedError, type EgressPolicy } from '@workauto/egress';
import { OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { isRefusal, oauthErrorText } from '../domain/oauth.js';
import type { Challenge } from '../mcp/session.js';
import { AppOAuthProvider } from './provider.js';

/** The most of an answer of an authorization server read (metadata, registration, tokens). */
const ANSWER_MAX_BYTES = 256 * 1024;

/**
 * Why a step of the flow cannot go on: `unreachable` (an outage: retry later), `unsupported` (the
 * server's OAuth set-up cannot be used, or a URL of it is refused by the egress policy: retrying
 * gets the same), `client_required` (no registration endpoint and no client given).
 */
export class OAuthFlowError extends Error {
  override name = 'OAuthFlowError';
  constructor(
    readonly kind: 'unreachable' | 'unsupported' | 'client_required',
    message: string,
  ) {
    super(message);
  }
}

/**
 * The fetch the SDK's OAuth requests go through: the egress policy (checked at every connection,
 * redirects never followed by it), the flow's one deadline, answers bounded.
 */
export function oauthFetch(egress: EgressPolicy, timeoutMs: number): FetchLike {
  const deadlineAt = Date.now() + timeoutMs;
  return (url, init) =>
    egress.fetch(url, {
      ...init,
      timeoutMs: Math.max(1, deadlineAt - Date.now()),
      maxResponseBytes: ANSWER_MAX_BYTES,
    });
}

/** What an error of a request to `what` means for the flow. */
function flowError(what: string, err: unknown): OAuthFlowError {
  if (err instanceof EgressRefusedError) return new OAuthFlowError('unsupported', `${what}: ${err.reason}`);
  if (err instanceof EgressError)
    return new OAuthFlowError('unreachable', `${what} could not be reached: ${err.message}`);
  if (isRefusal(err)) return new OAuthFlowError('unsupported', `${what} refused: ${oauthErrorText(err).slice(0, 300)}`);
  const message = err instanceof Error ? err.message : String(err);
  // The SDK says "HTTP 503 …" of a failed answer; a server_error or temporarily_unavailable passes too.
  const outage = err instanceof OAuthError ? !message.startsWith('HTTP 4') : /^HTTP 5\d\d\b/.test(message);
  return new OAuthFlowError(outage ? 'unreachable' : 'unsupported', `${what} failed: ${message.slice(0, 300)}`);
}

/**
 * Finds the server's authorization server: its protected resource metadata (RFC 9728; at the URL
 * its 401 named, else at the well-known URL), then the authorization server's metadata (RFC 8414,
 * else OpenID discovery). A server without protected resource metadata is its own authorization
 * server (MCP 2025-03-26). Every URL it names must pass the egress policy, the authorization
 * endpoint handed to the browser included.
 */
export async function discover(
  serverUrl: string,
  challenge: Challenge | undefined,
  egress: EgressPolicy,
  fetchFn: FetchLike,
): Promise<OAuthDiscoveryState & { authorizationServerMetadata: AuthorizationServerMetadata }> {
  const metadataUrl = challenge?.resourceMetadataUrl;
  let resourceMetadata: OAuthProtectedResourceMetadata | undefined;
  try {
    resourceMetadata = await discoverOAuthProtectedResourceMetadata(
      serverUrl,
      metadataUrl ? { resourceMetadataUrl: metadataUrl } : undefined,
      fetchFn,
    );
  } catch (err) {
    // The SDK's words for a 404 at the well-known URLs: a server from before RFC 9728.
    const absent =
      err instanceof Error && err.message.includes('does not implement OAuth 2.0 Protected Resource Metadata');
    if (!absent || metadataUrl)
      throw flowError(`the server's protected resource metadata${metadataUrl ? ` (${metadataUrl.href})` : ''}`, err);
  }
  const authorizationServerUrl = resourceMetadata?.authorization_servers?.[0] ?? new URL('/', serverUrl).href;
  const refused = await egress.refusal(authorizationServerUrl);
  if (refused)
    throw new OAuthFlowError('unsupported', `the authorization server ${authorizationServerUrl}: ${refused}`);
  let metadata: AuthorizationServerMetadata | undefined;
  try {
    metadata = await discoverAuthorizationServerMetadata(authorizationServerUrl, { fetchFn });
  } catch (err) {
    throw flowError(`the metadata of the authorization server ${authorizationServerUrl}`, err);
  }
  if (!metadata)
    throw new OAuthFlowError(
      'unsupported',
      `the authorization server ${authorizationServerUrl} publishes no metadata (RFC 8414 or OpenID discovery)`,
    );
  // RFC 8414 §3.3: metadata for another issuer would let one server pose as another.
  if (metadata.issuer.replace(/\/$/, '') !== authorizationServerUrl.replace(/\/$/, ''))
    throw new OAuthFlowError(
      'unsupported',
      `the metadata at ${authorizationServerUrl} names another issuer (${metadata.issuer}); RFC 8414 requires the same`,
    );
  if (!metadata.code_challenge_methods_supported?.includes('S256'))
    throw new OAuthFlowError(
      'unsupported',
      `the authorization server ${authorizationServerUrl} does not advertise PKCE with S256 (code_challenge_methods_supported), which the MCP authorization flow requires`,
    );
  const endpoints = {
    authorization_endpoint: metadata.authorization_endpoint,
    token_endpoint: metadata.token_endpoint,
    registration_endpoint: metadata.registration_endpoint,
    revocation_endpoint: revocationOf(metadata).endpoint,
  };
  for (const [name, url] of Object.entries(endpoints)) {
    const why = url === undefined ? undefined : await egress.refusal(url);
    if (why) throw new OAuthFlowError('unsupported', `the authorization server's ${name} ${url}: ${why}`);
  }
  return {
    authorizationServerUrl,
    authorizationServerMetadata: metadata,
    ...(resourceMetadata ? { resourceMetadata } : {}),
    ...(metadataUrl ? { resourceMetadataUrl: metadataUrl.href } : {}),
  };
}

/** The RFC 8707 resource sent with the consent and every token request: the server's metadata's, verbatim. */
export const resourceOf = (discovery: OAuthDiscoveryState) => discovery.resourceMetadata?.resource;

/**
 * Starts a consent with the SDK's `auth`: registers a client when there is none (Dynamic Client
 * Registration), makes the PKCE pair, and builds the authorization URL with state, scope and
 * resource. Returns what the caller stores: the URL, the verifier, and a newly registered client.
 */
export async function startConsent(opts: {
  serverUrl: string;
  discovery: OAuthDiscoveryState & { authorizationServerMetadata: AuthorizationServerMetadata };
  client: OAuthClientInformationMixed | undefined;
  tenantClient: boolean;
  redirectUrl: string;
  scope: string | undefined;
  state: string;
  fetchFn: FetchLike;
}): Promise<{ authorizationUrl: URL; codeVerifier: string; registered: OAuthClientInformationMixed | undefined }> {
  const metadata = opts.discovery.authorizationServerMetadata;
  if (!opts.client && !metadata.registration_endpoint)
    throw new OAuthFlowError(
      'client_required',
      `the authorization server ${opts.discovery.authorizationServerUrl} offers no Dynamic Client Registration; register a client there (redirect URI ${opts.redirectUrl}) and give it in the app's auth: {"type": "oauth2", "client_id": "…", "client_secret": "…"} (POST /api/v1/apps/{slug}/auth/rotate)`,
    );
  const provider = new AppOAuthProvider({
    redirectUrl: opts.redirectUrl,
    client: opts.client,
    tenantClient: opts.tenantClient,
    discovery: opts.discovery,
    state: opts.state,
  });
  try {
    const result = await auth(provider, { serverUrl: opts.serverUrl, scope: opts.scope, fetchFn: opts.fetchFn });
    const { authorizationUrl, codeVerifier } = provider.saved;
    if (result !== 'REDIRECT' || !authorizationUrl || !codeVerifier)
      throw new Error(`the MCP SDK's auth ended with ${result} without an authorization URL`);
    return { authorizationUrl, codeVerifier, registered: provider.saved.client };
  } catch (err) {
    if (err instanceof OAuthFlowError) throw err;
    throw flowError(`the authorization server ${opts.discovery.authorizationServerUrl}`, err);
  }
}

/** The stored parts of a connection that token requests need. */
export interface Connection {
  discovery: OAuthDiscoveryState;
  client: OAuthClientInformationMixed;
  resource: string | undefined;
}

/** Exchanges a consent's code for tokens (PKCE: the flow's verifier; the SDK's `fetchToken`). */
export function exchangeCode(
  connection: Connection & { tenantClient: boolean },
  opts: { code: string; codeVerifier: string; redirectUrl: string; fetchFn: FetchLike },
): Promise<OAuthTokens> {
  const provider = new AppOAuthProvider({
    redirectUrl: opts.redirectUrl,
    client: connection.client,
    tenantClient: connection.tenantClient,
    discovery: connection.discovery,
    codeVerifier: opts.codeVerifier,
  });
  return fetchToken(provider, connection.discovery.authorizationServerUrl, {
    metadata: connection.discovery.authorizationServerMetadata,
    resource: connection.resource,
    authorizationCode: opts.code,
    fetchFn: opts.fetchFn,
  });
}

/**
 * A refresh grant (the SDK's `refreshAuthorization`, not `auth`: `auth` swallows a refused refresh
 * into a new consent, where the service must tell a revoked grant from an outage).
 */
export function refreshTokens(connection: Connection, refreshToken: string, fetchFn: FetchLike): Promise<OAuthTokens> {
  return refreshAuthorization(connection.discovery.authorizationServerUrl, {
    metadata: connection.discovery.authorizationServerMetadata,
    clientInformation: connection.client,
    refreshToken,
    resource: connection.resource,
    fetchFn,
  });
}

/**
 * Revokes one token at the authorization server's revocation endpoint (RFC 7009), authenticated as
 * the client is at its token endpoint. Throws the OAuth error or the egress error.
 */
export async function revokeToken(
  connection: Connection,
  token: { value: string; hint: 'refresh_token' | 'access_token' },
  fetchFn: FetchLike,
): Promise<void> {
  const { endpoint, methods } = revocationOf(connection.discovery.authorizationServerMetadata);
  if (!endpoint) throw new Error('the authorization server advertises no revocation endpoint');
  const params = new URLSearchParams({ token: token.value, token_type_hint: token.hint });
  const headers = new Headers({ 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' });
  const { client_id, client_secret } = connection.client;
  const method = selectClientAuthMethod(
    connection.client,
    methods ?? connection.discovery.authorizationServerMetadata?.token_endpoint_auth_methods_supported ?? [],
  );
  // As the SDK authenticates at the token endpoint (client/auth.ts applyClientAuthentication).
  if (method === 'client_secret_basic' && client_secret)
    headers.set('authorization', `Basic ${Buffer.from(`${client_id}:${client_secret}`).toString('base64')}`);
  else {
    params.set('client_id', client_id);
    if (method === 'client_secret_post' && client_secret) params.set('client_secret', client_secret);
  }
  const response = await fetchFn(endpoint, { method: 'POST', headers, body: params });
  if (!response.ok) throw await parseErrorResponse(response);
  await response.body?.cancel();
}

/**
 * The revocation endpoint (RFC 7009) and its authentication methods, as RFC 8414 metadata names
 * them (the SDK's OpenID metadata type lists neither, though providers publish them there too).
 */
export function revocationOf(metadata: AuthorizationServerMetadata | undefined): {
  endpoint: string | undefined;
  methods: string[] | undefined;
} {
  const m = metadata as
    { revocation_endpoint?: unknown; revocation_endpoint_auth_methods_supported?: unknown } | undefined;
  const endpoint = typeof m?.revocation_endpoint === 'string' ? m.revocation_endpoint : undefined;
  const methods = Array.isArray(m?.revocation_endpoint_auth_methods_supported)
    ? m.revocation_endpoint_auth_methods_supported.filter((x): x is string => typeof x === 'string')
    : undefined;
  return { endpoint, methods };
}
