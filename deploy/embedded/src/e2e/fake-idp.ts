import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import * as jose from 'jose';

/**
 * A real OpenID Connect provider on loopback for tests: discovery, an authorize endpoint that
 * consents at once and redirects back with a code, a token endpoint that checks the client secret
 * and the PKCE S256 verifier, and an RS256-signed id_token carrying the nonce.
 */
export async function startFakeIdp(opts: { clientId: string; clientSecret: string }) {
  const { publicKey, privateKey } = await jose.generateKeyPair('RS256');
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const codes = new Map<string, { challenge: string; nonce?: string; redirectUri: string }>();
  const tokenRequests: { verifierOk: boolean }[] = [];
  /** Every token handed out, so tests can check none leaks into responses or logs. */
  const issued: string[] = [];
  let issuer = '';
  /** While down, every endpoint answers 503, as a provider in an outage does. */
  let down = false;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (down) {
      res.writeHead(503, { 'content-type': 'text/html' }).end('<h1>Service Unavailable</h1>');
      return;
    }
    const url = new URL(req.url!, issuer);
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (url.pathname === '/.well-known/openid-configuration') {
      return json(200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['client_secret_post'],
      });
    }
    if (url.pathname === '/jwks') return json(200, { keys: [jwk] });
    if (url.pathname === '/authorize') {
      const q = url.searchParams;
      if (
        q.get('client_id') !== opts.clientId ||
        q.get('code_challenge_method') !== 'S256' ||
        !q.get('code_challenge')
      ) {
        return json(400, { error: 'invalid_request' });
      }
      const code = randomBytes(16).toString('hex');
      codes.set(code, {
        challenge: q.get('code_challenge')!,
        nonce: q.get('nonce') ?? undefined,
        redirectUri: q.get('redirect_uri')!,
      });
      const back = new URL(q.get('redirect_uri')!);
      back.searchParams.set('code', code);
      back.searchParams.set('state', q.get('state')!);
      res.writeHead(302, { location: back.href }).end();
      return;
    }
    if (url.pathname === '/token' && req.method === 'POST') {
      let body = '';
      for await (const chunk of req) body += chunk;
      const form = new URLSearchParams(body);
      const grant = codes.get(form.get('code') ?? '');
      codes.delete(form.get('code') ?? ''); // codes are single-use
      if (form.get('client_id') !== opts.clientId || form.get('client_secret') !== opts.clientSecret)
        return json(401, { error: 'invalid_client' });
      if (!grant || form.get('redirect_uri') !== grant.redirectUri) return json(400, { error: 'invalid_grant' });
      const verifierOk =
        createHash('sha256')
          .update(form.get('code_verifier') ?? '')
          .digest('base64url') === grant.challenge;
      tokenRequests.push({ verifierOk });
      if (!verifierOk) return json(400, { error: 'invalid_grant', error_description: 'PKCE verification failed' });
      const idToken = await new jose.SignJWT({ nonce: grant.nonce, email: 'user@idp.test' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(issuer)
        .setAudience(opts.clientId)
        .setSubject('user-1')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey);
      const accessToken = `at_${randomBytes(12).toString('hex')}`;
      const refreshToken = `rt_${randomBytes(12).toString('hex')}`;
      issued.push(accessToken, refreshToken, idToken);
      return json(200, {
        access_token: accessToken,
        refresh_token: refreshToken,
        id_token: idToken,
        token_type: 'Bearer',
        expires_in: 3600,
        scope: 'openid email',
      });
    }
    json(404, { error: 'not_found' });
  };
  // A handler that throws answers 500 (a test then sees the failure), not an unhandled rejection.
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) res.destroy(err as Error);
      else res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const setDown = (value: boolean) => {
    down = value;
  };
  return {
    issuer,
    tokenRequests,
    issued,
    setDown,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
