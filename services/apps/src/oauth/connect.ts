/**
 * Connecting an oauth2 app (docs/apps.md "OAuth"): the authorize (the server's 401 challenge,
 * discovery, a client, the consent URL), the callback (the code exchanged for tokens, stored
 * encrypted) and the disconnect (RFC 7009 revocation, the tokens forgotten). Each is audited.
 */
import * as grpc from '@grpc/grpc-js';
import { randomBase62, sha256Hex, type Keyring } from '@workauto/crypto';
import { withTransaction, type Pool } from '@workauto/db';
import type { EgressPolicy } from '@workauto/egress';
import { recordEvent, type EventContext } from '@workauto/events';
import { DomainError, errors, returnToWith, type CallContext } from '@workauto/grpc';
import type { Clock } from '@workauto/jobs';
import { oauthClient, openTokens, sealClient, sealTokens, verifierContext } from '../credentials.js';
import { redact } from '../domain/failures.js';
import {
  accessTokenExpiresAt,
  callbackReason,
  connectHint,
  isRefusal,
  oauthErrorText,
  STATE_TTL_MS,
} from '../domain/oauth.js';
import { appData, partsOne, SOURCE, type AppParts } from '../handlers/common.js';
import { McpExchangeError, withMcpSession, type Challenge } from '../mcp/session.js';
import * as apps from '../repo/apps.js';
import type { AppRow } from '../repo/apps.js';
import * as oauth from '../repo/oauth.js';
import {
  discover,
  exchangeCode,
  oauthFetch,
  OAuthFlowError,
  resourceOf,
  revocationOf,
  revokeToken,
  startConsent,
} from './flow.js';
import { connectionOf } from './tokens.js';

/** Where consents come back and where they may end (OAUTH_REDIRECT_BASE_URL, OAUTH_ALLOWED_RETURN_ORIGINS). */
export interface OAuthRedirects {
  /** The public gateway URL; the callback is <base>/api/v1/apps/oauth/callback. */
  redirectBaseUrl: string;
  allowedReturnOrigins: string[];
}

export interface AppOAuthOptions {
  pool: Pool;
  keyring: Keyring;
  egress: EgressPolicy;
  clock: Clock;
  redirects: OAuthRedirects;
  /** One step's time: the authorize's requests in all, the code exchange, a revocation. */
  timeoutMs: number;
  /** Asks for a probe now (a connected app is probed at once). */
  wake: () => void;
}

/** The app is not an oauth2 app: these routes are not for it. */
const notOAuth = (app: AppRow) =>
  errors.failedPrecondition(
    'APP_NOT_OAUTH',
    `app ${app.slug} uses auth_type ${app.auth_type}; to connect it over OAuth, set {"auth": {"type": "oauth2"}} with POST /api/v1/apps/${app.slug}/auth/rotate`,
  );

/** An error of the flow as the API answers it. */
function flowAnswer(app: AppRow, err: OAuthFlowError): DomainError {
  const metadata = { app_slug: app.slug };
  if (err.kind === 'unreachable')
    return errors.unavailable(
      'APP_UNREACHABLE',
      `app ${app.slug} could not be connected: ${err.message}; retry later`,
      metadata,
    );
  return new DomainError(
    grpc.status.FAILED_PRECONDITION,
    err.kind === 'client_required' ? 'APP_OAUTH_CLIENT_REQUIRED' : 'APP_OAUTH_UNSUPPORTED',
    `app ${app.slug} cannot be connected over OAuth: ${err.message}`,
    { metadata },
  );
}

/** The authorize, callback and disconnect of oauth2 apps. */
export class AppOAuth {
  constructor(private readonly o: AppOAuthOptions) {}

  private get redirectUrl(): string {
    return `${this.o.redirects.redirectBaseUrl.replace(/\/$/, '')}/api/v1/apps/oauth/callback`;
  }

  /**
   * Starts a consent: the authorization URL to send the user's browser to. The discovery and a
   * newly registered client are stored with the flow's state (hashed; the PKCE verifier encrypted).
   */
  async authorize(
    app: AppRow,
    returnTo: string,
    ctx: CallContext,
  ): Promise<{ authorization_url: string; expires_at: Date }> {
    const { pool, keyring, egress, clock, timeoutMs } = this.o;
    if (app.auth_type !== 'oauth2') throw notOAuth(app);
    const fetchFn = oauthFetch(egress, timeoutMs);
    let consent: Awaited<ReturnType<typeof startConsent>>;
    let discovery: Awaited<ReturnType<typeof discover>>;
    const state = randomBase62(43);
    try {
      const challenge = await this.challenge(app);
      discovery = await discover(app.mcp_server_url, challenge, egress, fetchFn);
      const { client, tenantClient } = oauthClient(keyring, app, await oauth.findOAuth(pool, app.tenant_id, app.id));
      consent = await startConsent({
        serverUrl: app.mcp_server_url,
        discovery,
        client,
        tenantClient,
        redirectUrl: this.redirectUrl,
        scope: app.oauth_scope ?? challenge?.scope,
        state,
        fetchFn,
      });
    } catch (err) {
      throw err instanceof OAuthFlowError ? flowAnswer(app, err) : err;
    }
    const stateHash = sha256Hex(state);
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + STATE_TTL_MS);
    const registered = consent.registered && sealClient(keyring, app.tenant_id, app.id, consent.registered);
    await withTransaction(
      pool,
      async (tx) => {
        const current = await apps.findAppById(tx, app.tenant_id, app.id, 'update');
        if (!current) throw errors.notFound('app', app.slug);
        if (current.target_version !== app.target_version)
          throw errors.failedPrecondition(
            'APP_CHANGED',
            `app ${app.slug} changed while it was being connected; call POST /api/v1/apps/${app.slug}/oauth/authorize again`,
          );
        await oauth.saveDiscovered(tx, app.tenant_id, app.id, {
          authorization_server: discovery.authorizationServerUrl,
          resource: resourceOf(discovery) ?? null,
          discovery,
          registered,
        });
        await oauth.insertState(tx, {
          state_hash: stateHash,
          tenant_id: app.tenant_id,
          app_id: app.id,
          target_version: app.target_version,
          return_to: returnTo,
          redirect_uri: this.redirectUrl,
          code_verifier_ciphertext: keyring.encrypt(consent.codeVerifier, verifierContext(stateHash)),
          actor_type: ctx.actor?.type ?? 'system',
          actor_id: ctx.actor?.id ?? 'system',
          member_id: ctx.actor?.memberId ?? null,
          expires_at: expiresAt,
          now,
        });
        await recordEvent(tx, SOURCE, ctx, {
          type: 'app.authorization_started',
          resourceType: 'app',
          resourceId: app.id,
          metadata: {
            slug: app.slug,
            authorization_server: discovery.authorizationServerUrl,
            client_registration: app.oauth_client_id ? 'tenant' : 'dynamic',
            registered_now: registered !== undefined,
            return_to_origin: new URL(returnTo).origin,
            ...(ctx.actor?.memberId ? { member_id: ctx.actor.memberId } : {}),
          },
        });
      },
      { signal: ctx.signal },
    );
    return { authorization_url: consent.authorizationUrl.href, expires_at: expiresAt };
  }

  /**
   * What the server's 401 to an MCP request without a token names (RFC 9728 §5.1: where its
   * protected resource metadata is, which scopes), if it answers one; a server that cannot be
   * reached cannot be connected.
   */
  private async challenge(app: AppRow): Promise<Challenge | undefined> {
    try {
      await withMcpSession(
        { url: app.mcp_server_url, headers: {}, egress: this.o.egress, timeoutMs: this.o.timeoutMs, secrets: [] },
        async () => undefined,
      );
      return undefined;
    } catch (err) {
      if (!(err instanceof McpExchangeError)) throw err;
      if (err.challenge) return err.challenge;
      if (err.failure.status === 'unreachable') throw new OAuthFlowError('unreachable', err.failure.reason);
      return undefined; // the well-known URLs may still say
    }
  }

  /**
   * The callback: the state (single-use, 10 minutes) is the credential. Sends the browser back to
   * return_to with `status=connected` or `status=error&reason=…`; an authorization server that
   * cannot be reached is a 503 and the state is kept, so the same callback can be retried.
   */
  async complete(
    req: {
      code?: string | undefined;
      state?: string | undefined;
      error?: string | undefined;
      iss?: string | undefined;
    },
    ctx: CallContext,
  ): Promise<{ location: string }> {
    const { pool, keyring, egress, clock, timeoutMs } = this.o;
    const startAgain = 'start again with POST /api/v1/apps/{slug}/oauth/authorize';
    if (!req.state) throw errors.invalidField('state', `is required: ${startAgain}`);
    const stateHash = sha256Hex(req.state);
    const pending = await oauth.consumeState(pool, stateHash, clock.now());
    if (!pending) throw errors.invalidField('state', `is unknown, expired or already used: ${startAgain}`);
    const app = await apps.findAppById(pool, pending.tenant_id, pending.app_id);
    if (!app) throw errors.invalidField('state', `belongs to an app that was deleted: ${startAgain}`);
    const back = (params: Record<string, string>) => returnToWith(pending.return_to, { ...params, app: app.slug });
    const fail = (reason: string) => back({ status: 'error', reason });
    if (app.auth_type !== 'oauth2' || app.target_version !== pending.target_version) return fail('app_changed');
    if (req.error) return fail(callbackReason(req.error, 'authorization_failed'));
    if (!req.code) return fail('missing_code');
    const row = await oauth.findOAuth(pool, app.tenant_id, app.id);
    const connection = row && connectionOf(keyring, app, row);
    if (!connection) return fail('app_changed');
    // RFC 9207: a server that names itself must be the one the consent was started with.
    const issuer = connection.discovery.authorizationServerMetadata?.issuer;
    if (req.iss !== undefined && issuer !== undefined && req.iss !== issuer) return fail('issuer_mismatch');
    let tokens: Awaited<ReturnType<typeof exchangeCode>>;
    try {
      tokens = await exchangeCode(
        { ...connection, tenantClient: app.oauth_client_id !== null },
        {
          code: req.code,
          codeVerifier: keyring.decrypt(pending.code_verifier_ciphertext, verifierContext(stateHash)),
          redirectUrl: pending.redirect_uri,
          fetchFn: oauthFetch(egress, timeoutMs),
        },
      );
    } catch (err) {
      if (isRefusal(err)) return fail(callbackReason(err.errorCode, 'token_exchange_failed'));
      // The authorization server never judged the code: the same callback may be retried.
      await oauth.releaseState(pool, stateHash);
      throw errors.unavailable(
        'APP_UNREACHABLE',
        `the authorization server of app ${app.slug} could not be reached to exchange the code (${(err as Error).message}); retry this callback, or ${startAgain}`,
        { app_slug: app.slug },
      );
    }
    const actorCtx: EventContext = {
      ...ctx,
      tenantId: pending.tenant_id,
      actor: { type: pending.actor_type, id: pending.actor_id },
    };
    const now = clock.now();
    // No signal: the single-use code is spent, so keeping its tokens beats dropping them.
    const stored = await withTransaction(pool, async (tx) => {
      const current = await apps.findAppById(tx, app.tenant_id, app.id, 'update');
      if (current?.auth_type !== 'oauth2' || current.target_version !== pending.target_version) return false;
      const sealed = sealTokens(keyring, app.tenant_id, app.id, tokens);
      await oauth.saveTokens(
        tx,
        app.tenant_id,
        app.id,
        { ...sealed, expiresAt: accessTokenExpiresAt(tokens, now) },
        { connectedAt: now },
      );
      // Probed at once; a probe that began before the connect writes nothing over it (its target moved).
      const updated = await apps.updateApp(tx, app.tenant_id, app.id, {
        status: 'pending',
        status_reason: null,
        consecutive_probe_failures: 0,
        target_version: current.target_version + 1,
        next_probe_at: new Date(0),
      });
      await recordEvent(tx, SOURCE, actorCtx, {
        type: 'app.connected',
        resourceType: 'app',
        resourceId: app.id,
        data: appData(updated, await partsOne(tx, updated)),
        metadata: {
          slug: app.slug,
          authorization_server: connection.discovery.authorizationServerUrl,
          scope: tokens.scope ?? null,
          refresh_token: tokens.refresh_token !== undefined,
          ...(pending.member_id ? { member_id: pending.member_id } : {}),
        },
      });
      return true;
    });
    if (!stored) return fail('app_changed');
    this.o.wake();
    return back({ status: 'connected' });
  }

  /**
   * Revokes the app's tokens where the authorization server advertises RFC 7009 and forgets them
   * either way; the app becomes `needs_authorization`, its status_reason saying what the server did.
   */
  async disconnect(app: AppRow, ctx: CallContext): Promise<{ row: AppRow; parts: AppParts }> {
    const { pool, keyring, egress, timeoutMs } = this.o;
    if (app.auth_type !== 'oauth2') throw notOAuth(app);
    // Under the refresh lock: a refresh in flight ends first, and its new tokens are the ones revoked.
    const taken = await withTransaction(
      pool,
      async (tx) => {
        await oauth.lockTokens(tx, app.id, timeoutMs + 5_000);
        const row = await oauth.findOAuth(tx, app.tenant_id, app.id);
        const tokens = row && openTokens(keyring, row);
        if (!row || !tokens) return undefined;
        await oauth.forgetTokens(tx, app.tenant_id, app.id);
        return { row, tokens };
      },
      { attempts: 1 },
    );
    let revocation: 'revoked' | 'not_advertised' | 'failed' | 'not_connected' = 'not_connected';
    let said = 'it was not connected';
    if (taken) {
      const connection = connectionOf(keyring, app, taken.row);
      const { access_token, refresh_token } = taken.tokens;
      if (!connection || !revocationOf(connection.discovery.authorizationServerMetadata).endpoint) {
        revocation = 'not_advertised';
        said =
          'the authorization server advertises no revocation endpoint (RFC 7009): the tokens were forgotten here and stay valid there until they expire';
      } else {
        const fetchFn = oauthFetch(egress, timeoutMs);
        try {
          if (refresh_token) await revokeToken(connection, { value: refresh_token, hint: 'refresh_token' }, fetchFn);
          await revokeToken(connection, { value: access_token, hint: 'access_token' }, fetchFn);
          revocation = 'revoked';
          said = 'the authorization server revoked the tokens';
        } catch (err) {
          revocation = 'failed';
          const why = isRefusal(err) ? oauthErrorText(err) : (err as Error).message;
          said = `the authorization server did not revoke the tokens (${why}): they were forgotten here and stay valid there until they expire`;
        }
      }
      said = redact(said, [access_token, ...(refresh_token ? [refresh_token] : [])]);
    }
    return withTransaction(pool, async (tx) => {
      const current = await apps.findAppById(tx, app.tenant_id, app.id, 'update');
      if (!current) throw errors.notFound('app', app.slug);
      const row = await apps.updateApp(tx, app.tenant_id, app.id, {
        status: 'needs_authorization',
        status_reason: `disconnected: ${said}; ${connectHint(app.slug)}`.slice(0, 500),
        target_version: current.target_version + 1,
      });
      const parts = await partsOne(tx, row);
      await recordEvent(tx, SOURCE, ctx, {
        type: 'app.disconnected',
        resourceType: 'app',
        resourceId: app.id,
        data: appData(row, parts),
        metadata: {
          slug: app.slug,
          revocation,
          ...(ctx.actor?.memberId ? { member_id: ctx.actor.memberId } : {}),
        },
      });
      return { row, parts };
    });
  }
}
