import { Keyring, hint } from '@workauto/crypto';
import type { EventContext } from '@workauto/events';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { authHeaders, type AuthInput } from './domain/auth.js';
import { McpExchangeError } from './mcp/session.js';
import type { AppTokens } from './oauth/tokens.js';
import type { AppRow } from './repo/apps.js';
import type { OAuthRow } from './repo/oauth.js';

/**
 * An app's credentials: sealed for storage when they are set (create, rotate, an OAuth connect or
 * refresh) and opened only to talk to the app's servers (a probe, a tool call, a token request).
 * Each is encrypted under its own context naming the tenant and app, so a ciphertext copied to
 * another app, tenant or column does not decrypt.
 */

const secretContext = (tenantId: string, appId: string) => `app_auth:${tenantId}:${appId}`;
const tokensContext = (tenantId: string, appId: string) => `app_oauth_tokens:${tenantId}:${appId}`;
const clientContext = (tenantId: string, appId: string) => `app_oauth_client:${tenantId}:${appId}`;
/** A consent flow's PKCE verifier, bound to its state. */
export const verifierContext = (stateHash: string) => `app_oauth_state:${stateHash}`;

/** The stored form of a credential for one app: ciphertext, key id and hint (nothing for none). */
export function sealed(keyring: Keyring, tenantId: string, appId: string, auth: AuthInput) {
  if (!auth.secret) return { auth_ciphertext: null, auth_key_id: null, auth_hint: null };
  const ciphertext = keyring.encrypt(auth.secret, secretContext(tenantId, appId));
  return { auth_ciphertext: ciphertext, auth_key_id: Keyring.keyIdOf(ciphertext), auth_hint: hint(auth.secret) };
}

const openSecret = (keyring: Keyring, app: AppRow) =>
  app.auth_ciphertext ? keyring.decrypt(app.auth_ciphertext, secretContext(app.tenant_id, app.id)) : null;

/** An OAuth token response, sealed for app_oauth.tokens_ciphertext. */
export function sealTokens(keyring: Keyring, tenantId: string, appId: string, tokens: OAuthTokens) {
  const ciphertext = keyring.encrypt(JSON.stringify(tokens), tokensContext(tenantId, appId));
  return { ciphertext, keyId: Keyring.keyIdOf(ciphertext) };
}

/** The stored tokens of an oauth2 app, or undefined while it is not connected. */
export function openTokens(keyring: Keyring, row: OAuthRow): OAuthTokens | undefined {
  if (!row.tokens_ciphertext) return undefined;
  return JSON.parse(keyring.decrypt(row.tokens_ciphertext, tokensContext(row.tenant_id, row.app_id))) as OAuthTokens;
}

/** A client Dynamic Client Registration gave, sealed (its secret is in it) with its id beside it. */
export function sealClient(keyring: Keyring, tenantId: string, appId: string, client: OAuthClientInformationMixed) {
  const ciphertext = keyring.encrypt(JSON.stringify(client), clientContext(tenantId, appId));
  return { client_id: client.client_id, client_ciphertext: ciphertext, client_key_id: Keyring.keyIdOf(ciphertext) };
}

/**
 * The OAuth client of an oauth2 app: the one the tenant gave (client_id, and its secret as the
 * app's secret), else the one Dynamic Client Registration gave, else none yet.
 */
export function oauthClient(
  keyring: Keyring,
  app: AppRow,
  oauth: OAuthRow | undefined,
): { client: OAuthClientInformationMixed | undefined; tenantClient: boolean } {
  if (app.oauth_client_id) {
    const secret = openSecret(keyring, app);
    return {
      client: { client_id: app.oauth_client_id, ...(secret ? { client_secret: secret } : {}) },
      tenantClient: true,
    };
  }
  if (!oauth?.client_ciphertext) return { client: undefined, tenantClient: false };
  const client = JSON.parse(
    keyring.decrypt(oauth.client_ciphertext, clientContext(oauth.tenant_id, oauth.app_id)),
  ) as OAuthClientInformationMixed;
  return { client, tenantClient: false };
}

/** Where and how to reach an app's server: its URL, the credential's headers, the secrets to keep out of texts. */
export interface SessionTarget {
  url: string;
  headers: Record<string, string>;
  secrets: string[];
}

/** The session target of a static credential (none, bearer, header). */
function staticTarget(keyring: Keyring, app: AppRow): SessionTarget {
  const secret = openSecret(keyring, app);
  return {
    url: app.mcp_server_url,
    headers: authHeaders(app.auth_type, secret, app.auth_header_name),
    secrets: secret ? [secret] : [],
  };
}

/**
 * Runs exchanges with an app's server with its credential. A static one is sent as it is. An
 * oauth2 app sends its access token, refreshed first when it expires within a minute, and refreshed
 * once more when the server answers 401 anyway (it expired early, or was revoked), after which the
 * exchange runs again: the caller does not notice. Throws AppNeedsAuthorization when the app has no
 * usable token (never connected, or its refresh was refused), McpExchangeError otherwise.
 */
export class AppCredentials {
  constructor(
    private readonly keyring: Keyring,
    private readonly tokens: AppTokens,
  ) {}

  async use<T>(app: AppRow, ctx: EventContext, run: (target: SessionTarget) => Promise<T>): Promise<T> {
    if (app.auth_type !== 'oauth2') return run(staticTarget(this.keyring, app));
    let token = await this.tokens.current(app, ctx);
    const target = () => ({
      url: app.mcp_server_url,
      headers: { Authorization: `Bearer ${token.accessToken}` },
      secrets: token.secrets,
    });
    try {
      return await run(target());
    } catch (err) {
      // A 401 refused the token before the server did anything: refreshing and sending again is safe.
      if (!(err instanceof McpExchangeError) || err.failure.httpStatus !== 401) throw tokenRefused(err, app);
      token = await this.tokens.refresh(app, token.version, ctx);
      return run(target()).catch((again: unknown) => {
        throw tokenRefused(again, app);
      });
    }
  }
}

/** An oauth2 app's server refused a current token (403, or 401 right after a refresh): say what helps. */
function tokenRefused(err: unknown, app: AppRow): unknown {
  if (!(err instanceof McpExchangeError) || err.failure.status !== 'auth_failed') return err;
  const status = err.failure.httpStatus ?? 401;
  const reason = `the server refused the app's OAuth access token (HTTP ${status}); check the scopes the app asks for (auth.scope) or connect it again with POST /api/v1/apps/${app.slug}/oauth/authorize`;
  return new McpExchangeError({ ...err.failure, reason }, err.challenge);
}
