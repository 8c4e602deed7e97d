/**
 * An OAuth-protected MCP server in a process of its own (OAuthMcpServer.start spawns it), built
 * with the MCP SDK's server-side auth pieces: an authorization server (`mcpAuthRouter`: metadata,
 * Dynamic Client Registration, authorize with PKCE, token with refresh, revocation) on one port,
 * and on another the MCP server (`requireBearerAuth` for its tokens, with its protected resource
 * metadata). Consent is given at once (the test plays the browser). argv[2] is its options as
 * JSON; it prints {"mcpUrl", "issuer", "control"} once it listens and stops on SIGTERM.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import express, { type Response } from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import {
  createOAuthMetadata,
  mcpAuthMetadataRouter,
  mcpAuthRouter,
} from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type {
  OAuthClientInformationFull,
  OAuthTokenRevocationRequest,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { TEST_CERTIFICATE, TEST_PRIVATE_KEY } from '@workauto/egress/testing';
import { z } from '@workauto/config';
import type { OAuthMcpServerOptions, OAuthServerStats } from './oauth-mcp-server.js';

const options = JSON.parse(process.argv[2] ?? '{}') as OAuthMcpServerOptions;
const host = options.host ?? '127.0.0.1';
const scheme = options.tls ? 'https' : 'http';

const stats: OAuthServerStats = {
  registrations: 0,
  authorizations: [],
  tokenRequests: [],
  revocations: [],
  issued: [],
  mcpRequests: [],
  toolCalls: [],
};
const control = { deny: false, refreshDelayMs: 0 };

/** A secret this server hands out, recorded so the test can look for it where it must not be. */
const issue = (prefix: string) => {
  const value = `${prefix}_${randomBytes(18).toString('base64url')}`;
  stats.issued.push(value);
  return value;
};

class Clients implements OAuthRegisteredClientsStore {
  readonly clients = new Map<string, OAuthClientInformationFull>(
    (options.clients ?? []).map((c) => [c.client_id, { ...c, token_endpoint_auth_method: 'client_secret_post' }]),
  );
  getClient(clientId: string) {
    return this.clients.get(clientId);
  }
}
class RegisteringClients extends Clients {
  registerClient(client: Omit<OAuthClientInformationFull, 'client_id' | 'client_id_issued_at'>) {
    stats.registrations++;
    if (client.client_secret) stats.issued.push(client.client_secret);
    const full = { ...client, client_id: randomUUID(), client_id_issued_at: Math.floor(Date.now() / 1000) };
    this.clients.set(full.client_id, full);
    return full;
  }
}

interface Grant {
  clientId: string;
  scopes: string[];
  resource: string | undefined;
}

class Provider implements OAuthServerProvider {
  readonly clientsStore = options.registration === false ? new Clients() : new RegisteringClients();
  private readonly codes = new Map<string, Grant & { challenge: string; redirectUri: string }>();
  private readonly access = new Map<string, Grant & { expiresAt: number }>();
  private readonly refresh = new Map<string, Grant>();

  constructor(private readonly mcpUrl: string) {}

  authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response): Promise<void> {
    stats.authorizations.push({
      clientId: client.client_id,
      resource: params.resource?.href,
      scopes: params.scopes ?? [],
    });
    const target = new URL(params.redirectUri);
    if (params.state !== undefined) target.searchParams.set('state', params.state);
    if (control.deny) {
      target.searchParams.set('error', 'access_denied');
    } else {
      const code = issue('code');
      this.codes.set(code, {
        clientId: client.client_id,
        scopes: params.scopes ?? [],
        resource: params.resource?.href,
        challenge: params.codeChallenge,
        redirectUri: params.redirectUri,
      });
      target.searchParams.set('code', code);
    }
    res.redirect(302, target.href);
    return Promise.resolve();
  }

  challengeForAuthorizationCode(_client: OAuthClientInformationFull, code: string): Promise<string> {
    const grant = this.codes.get(code);
    if (!grant) throw new InvalidGrantError('unknown authorization code');
    return Promise.resolve(grant.challenge);
  }

  exchangeAuthorizationCode(
    client: OAuthClientInformationFull,
    code: string,
    _verifier?: string,
    redirectUri?: string,
    resource?: URL,
  ): Promise<OAuthTokens> {
    const grant = this.codes.get(code);
    this.codes.delete(code);
    stats.tokenRequests.push({ grantType: 'authorization_code', clientId: client.client_id, resource: resource?.href });
    if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
    if (redirectUri !== grant.redirectUri)
      throw new InvalidGrantError('redirect_uri differs from the authorization request');
    this.checkResource(resource);
    return Promise.resolve(this.tokens(grant));
  }

  async exchangeRefreshToken(
    client: OAuthClientInformationFull,
    refreshToken: string,
    _scopes?: string[],
    resource?: URL,
  ): Promise<OAuthTokens> {
    stats.tokenRequests.push({ grantType: 'refresh_token', clientId: client.client_id, resource: resource?.href });
    if (control.refreshDelayMs) await new Promise((resolve) => setTimeout(resolve, control.refreshDelayMs));
    const grant = this.refresh.get(refreshToken);
    // Rotation: a refresh token is spent by its use; a second use is refused.
    this.refresh.delete(refreshToken);
    if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError('the refresh token is not valid');
    this.checkResource(resource);
    return this.tokens(grant);
  }

  verifyAccessToken(token: string): Promise<AuthInfo> {
    const grant = this.access.get(token);
    if (!grant || grant.expiresAt <= Date.now()) throw new InvalidTokenError('the access token is not valid');
    return Promise.resolve({
      token,
      clientId: grant.clientId,
      scopes: grant.scopes,
      expiresAt: Math.floor(grant.expiresAt / 1000),
      ...(grant.resource ? { resource: new URL(grant.resource) } : {}),
    });
  }

  revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest): Promise<void> {
    const known = this.access.delete(request.token) || this.refresh.delete(request.token);
    stats.revocations.push({ clientId: client.client_id, hint: request.token_type_hint, known });
    return Promise.resolve();
  }

  expireAccessTokens(): void {
    for (const grant of this.access.values()) grant.expiresAt = 0;
  }

  revokeRefreshTokens(): void {
    this.refresh.clear();
  }

  /** RFC 8707: tokens are for this MCP server only. */
  private checkResource(resource: URL | undefined): void {
    if (resource?.href !== this.mcpUrl) throw new InvalidGrantError(`resource must be ${this.mcpUrl}`);
  }

  private tokens(grant: Grant): OAuthTokens {
    const accessToken = issue('at');
    const refreshToken = issue('rt');
    const ttl = options.accessTokenTtlSeconds ?? 3600;
    this.access.set(accessToken, { ...grant, expiresAt: Date.now() + ttl * 1000 });
    this.refresh.set(refreshToken, grant);
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: ttl,
      refresh_token: refreshToken,
      scope: grant.scopes.join(' '),
    };
  }
}

function listen(app: express.Express): { server: http.Server; ready: Promise<number> } {
  const server = options.tls
    ? https.createServer({ cert: TEST_CERTIFICATE, key: TEST_PRIVATE_KEY }, app)
    : http.createServer(app);
  server.listen(0, '127.0.0.1');
  return { server, ready: once(server, 'listening').then(() => (server.address() as AddressInfo).port) };
}

// Two ports: the authorization server and the MCP server (a resource server) are different origins;
// a third, plain http on loopback, for the test's control routes.
const authApp = express();
const mcpApp = express();
const controlApp = express();
const auth = listen(authApp);
const mcp = listen(mcpApp);
const controlServer = http.createServer(controlApp).listen(0, '127.0.0.1');
await once(controlServer, 'listening');
const issuer = new URL(`${scheme}://${host}:${await auth.ready}/`);
const mcpOrigin = `${scheme}://${host}:${await mcp.ready}`;
const mcpUrl = `${mcpOrigin}/mcp`;
const provider = new Provider(mcpUrl);
if (options.revocation === false) Object.assign(provider, { revokeToken: undefined });

const noLimit = { rateLimit: false as const };
authApp.use(
  mcpAuthRouter({
    provider,
    issuerUrl: issuer,
    scopesSupported: ['tools:read', 'tools:call'],
    authorizationOptions: noLimit,
    tokenOptions: noLimit,
    clientRegistrationOptions: noLimit,
    revocationOptions: noLimit,
  }),
);
controlApp.use(express.json());
controlApp.get('/stats', (_req, res) => void res.json(stats));
controlApp.post('/control', (req, res) => {
  const body = req.body as {
    deny?: boolean;
    refreshDelayMs?: number;
    expireAccessTokens?: boolean;
    revokeRefreshTokens?: boolean;
  };
  if (body.deny !== undefined) control.deny = body.deny;
  if (body.refreshDelayMs !== undefined) control.refreshDelayMs = body.refreshDelayMs;
  if (body.expireAccessTokens) provider.expireAccessTokens();
  if (body.revokeRefreshTokens) provider.revokeRefreshTokens();
  res.json({});
});

// The MCP server: its protected resource metadata names the authorization server, its 401s name the metadata.
const oauthMetadata = createOAuthMetadata({
  provider,
  issuerUrl: issuer,
  scopesSupported: ['tools:read', 'tools:call'],
});
const metadataRouter = mcpAuthMetadataRouter({ oauthMetadata, resourceServerUrl: new URL(mcpUrl) });
mcpApp.use((req, res, next) => {
  // Overrides for the refused-destination tests: the metadata names a server the egress policy refuses.
  if (options.authorizationServers && req.path === '/.well-known/oauth-protected-resource/mcp')
    return void res.json({ resource: mcpUrl, authorization_servers: options.authorizationServers });
  next();
});
mcpApp.use(metadataRouter);
const resourceMetadataUrl = options.resourceMetadataUrl ?? `${mcpOrigin}/.well-known/oauth-protected-resource/mcp`;
const bearer = requireBearerAuth({ verifier: provider, resourceMetadataUrl, expectedResource: new URL(mcpUrl) });
mcpApp.post(
  '/mcp',
  (req, res, next) => {
    const token = req.headers.authorization?.replace(/^Bearer /, '');
    res.on('finish', () => stats.mcpRequests.push({ status: res.statusCode, ...(token ? { token } : {}) }));
    next();
  },
  bearer,
  express.json(),
  (req, res) => {
    const server = new McpServer({ name: 'oauth-test', version: '1.0.0' });
    server.registerTool('echo', { description: 'Echoes its text', inputSchema: { text: z.string() } }, ({ text }) => {
      stats.toolCalls.push({ name: 'echo', token: req.auth?.token ?? '' });
      return { content: [{ type: 'text', text }] };
    });
    // A careless server that shows the caller its own token: it must never reach a response.
    server.registerTool('whoami', { description: 'Tells the token it was called with' }, () => {
      stats.toolCalls.push({ name: 'whoami', token: req.auth?.token ?? '' });
      return { content: [{ type: 'text', text: `you called with ${req.auth?.token}` }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => void transport.close().then(() => server.close()));
    void server.connect(transport).then(() => transport.handleRequest(req, res, req.body));
  },
);

const controlUrl = `http://127.0.0.1:${(controlServer.address() as AddressInfo).port}`;
process.stdout.write(`${JSON.stringify({ mcpUrl, issuer: issuer.href, control: controlUrl })}\n`);
process.once('SIGTERM', () => process.exit(0));
