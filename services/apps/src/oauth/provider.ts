/**
 * The MCP SDK's OAuthClientProvider for one app, over what the apps database holds for it: the
 * client (the tenant's, or one Dynamic Client Registration gave), the discovery state, and the
 * consent flow's PKCE verifier. It lives for one request: built from the rows, handed to the
 * SDK's `auth` or `fetchToken`, and what the SDK saved on it is written back by the caller, in the
 * transaction that records the flow. Nothing stays in memory between requests or replicas.
 */
import type { OAuthClientProvider, OAuthDiscoveryState } from '@modelcontextprotocol/sdk/client/auth.js';
import type {
  AuthorizationServerMetadata,
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';

export interface ProviderState {
  /** The callback URL (`<OAUTH_REDIRECT_BASE_URL>/api/v1/apps/oauth/callback`). */
  redirectUrl: string;
  /** The stored client, if any. */
  client: OAuthClientInformationMixed | undefined;
  /** True when the tenant gave the client: it is never forgotten nor registered again. */
  tenantClient: boolean;
  /** The discovery this request made (authorize) or stored (callback). */
  discovery: OAuthDiscoveryState;
  /** authorize: the flow's state; the callback has none to give. */
  state?: string;
  /** callback: the flow's PKCE verifier. */
  codeVerifier?: string;
}

export class AppOAuthProvider implements OAuthClientProvider {
  /** What the SDK handed back during this request, for the caller to store. */
  readonly saved: {
    client?: OAuthClientInformationMixed;
    codeVerifier?: string;
    authorizationUrl?: URL;
    tokens?: OAuthTokens;
  } = {};

  constructor(private readonly s: ProviderState) {}

  get redirectUrl(): string {
    return this.s.redirectUrl;
  }

  /** What Dynamic Client Registration asks for: a confidential client when the server lets it be one. */
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'workauto',
      redirect_uris: [this.s.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: authMethodFor(this.s.discovery.authorizationServerMetadata),
    };
  }

  state(): string {
    if (!this.s.state) throw new Error('no OAuth state for this request');
    return this.s.state;
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.saved.client ?? this.s.client;
  }

  saveClientInformation(client: OAuthClientInformationMixed): void {
    this.saved.client = client;
  }

  /**
   * None: an authorize always asks for a new consent, and refreshes are the service's own (one at a
   * time across replicas, under the database's lock), never the SDK's.
   */
  tokens(): undefined {
    return undefined;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.saved.tokens = tokens;
  }

  redirectToAuthorization(authorizationUrl: URL): void {
    this.saved.authorizationUrl = authorizationUrl;
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.saved.codeVerifier = codeVerifier;
  }

  codeVerifier(): string {
    const verifier = this.saved.codeVerifier ?? this.s.codeVerifier;
    if (!verifier) throw new Error('no PKCE code verifier for this request');
    return verifier;
  }

  discoveryState(): OAuthDiscoveryState {
    return this.s.discovery;
  }

  saveDiscoveryState(discovery: OAuthDiscoveryState): void {
    this.s.discovery = discovery;
  }

  /** A registered client the server no longer knows is registered again; the tenant's is kept (it cannot be). */
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if ((scope === 'all' || scope === 'client') && !this.s.tenantClient) {
      this.s.client = undefined;
      delete this.saved.client;
    }
  }
}

/**
 * The token endpoint authentication a registration asks for: a secret when the server accepts one
 * (RFC 8414's default is client_secret_basic), else a public client.
 */
function authMethodFor(metadata: AuthorizationServerMetadata | undefined): string {
  const methods = metadata?.token_endpoint_auth_methods_supported;
  if (!methods || methods.length === 0 || methods.includes('client_secret_basic')) return 'client_secret_basic';
  return methods.includes('client_secret_post') ? 'client_secret_post' : 'none';
}
