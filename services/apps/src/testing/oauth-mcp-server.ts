/**
 * A real OAuth-protected MCP server for the tests, in a process of its own
 * (testing/oauth-mcp-server-main.ts): its authorization server gives tokens only through the MCP
 * authorization flow, so the apps service connects to it as to any remote server. Driven and read
 * over its control routes.
 */
import { spawnServerProcess, type ServerProcess } from '@workauto/testing';

export interface OAuthMcpServerOptions {
  /** https with the egress tests' certificate (for 127.0.0.1 and receiver.test); default http. */
  tls?: boolean;
  /** The host name its URLs use (default 127.0.0.1); with tls, `receiver.test` resolved by the test's policy. */
  host?: string;
  /** Dynamic Client Registration offered (default true). */
  registration?: boolean;
  /** Clients registered beforehand (a tenant's own), authenticating with client_secret_post. */
  clients?: { client_id: string; client_secret?: string; redirect_uris: string[] }[];
  /** Access tokens' lifetime (default 3600 s). */
  accessTokenTtlSeconds?: number;
  /** A revocation endpoint offered (default true). */
  revocation?: boolean;
  /** What the MCP server's 401 names as its protected resource metadata (default: the real one). */
  resourceMetadataUrl?: string;
  /** What its protected resource metadata names as authorization servers (default: the real one). */
  authorizationServers?: string[];
}

/** What the server saw, in order. Every secret it handed out is in `issued`. */
export interface OAuthServerStats {
  registrations: number;
  authorizations: { clientId: string; resource: string | undefined; scopes: string[] }[];
  tokenRequests: {
    grantType: 'authorization_code' | 'refresh_token';
    clientId: string;
    resource: string | undefined;
  }[];
  revocations: { clientId: string; hint: string | undefined; known: boolean }[];
  /** Codes, access and refresh tokens, client secrets. */
  issued: string[];
  /** Every POST to the MCP endpoint: its HTTP status and the bearer token it carried. */
  mcpRequests: { status: number; token?: string }[];
  toolCalls: { name: string; token: string }[];
}

export class OAuthMcpServer {
  private constructor(
    private readonly running: ServerProcess<{ mcpUrl: string; issuer: string; control: string }>,
    /** The MCP endpoint (Streamable HTTP). */
    readonly mcpUrl: string,
    /** The authorization server's issuer URL. */
    readonly issuer: string,
    private readonly controlUrl: string,
  ) {}

  /** Spawns testing/oauth-mcp-server-main.js and waits until it listens. */
  static async start(options: OAuthMcpServerOptions = {}): Promise<OAuthMcpServer> {
    const running = await spawnServerProcess<{ mcpUrl: string; issuer: string; control: string }>(
      new URL('./oauth-mcp-server-main.js', import.meta.url),
      options,
    );
    const { mcpUrl, issuer, control } = running.info;
    return new OAuthMcpServer(running, mcpUrl, issuer, control);
  }

  async stats(): Promise<OAuthServerStats> {
    return (await (await fetch(`${this.controlUrl}/stats`)).json()) as OAuthServerStats;
  }

  /** `deny`: the next consents are refused (access_denied); `refreshDelayMs`: refresh grants answer that late. */
  async control(change: {
    deny?: boolean;
    refreshDelayMs?: number;
    expireAccessTokens?: boolean;
    revokeRefreshTokens?: boolean;
  }): Promise<void> {
    const res = await fetch(`${this.controlUrl}/control`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(change),
    });
    if (!res.ok) throw new Error(`OAuth MCP server control: HTTP ${res.status}`);
  }

  stop(): Promise<void> {
    return this.running.stop();
  }
}

/**
 * The browser's part of a consent: opens the authorization URL (consent is given at once) and
 * returns where the authorization server sent it back (the callback URL with code and state).
 */
export async function consent(
  authorizationUrl: string,
  browser: (url: string) => Promise<Response> = (url) => fetch(url, { redirect: 'manual' }),
): Promise<URL> {
  const res = await browser(authorizationUrl);
  const location = res.headers.get('location');
  if (res.status !== 302 || !location) throw new Error(`the consent answered ${res.status}: ${await res.text()}`);
  return new URL(location);
}
