/**
 * An oauth2 app's tokens in use (docs/apps.md "OAuth"): the access token to send, its refresh
 * before it expires or after a 401 (one refresh at a time across replicas, under an advisory lock
 * of the apps database), and what a refused refresh does: the tokens are forgotten, the app becomes
 * `needs_authorization`, and `app.authorization_required` is recorded.
 */
import type { Keyring } from '@workauto/crypto';
import { withTransaction, type Pool, type PoolClient } from '@workauto/db';
import type { EgressPolicy } from '@workauto/egress';
import { recordEvent, type EventContext } from '@workauto/events';
import type { Clock } from '@workauto/jobs';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { oauthClient, openTokens, sealTokens } from '../credentials.js';
import { redact } from '../domain/failures.js';
import {
  accessTokenExpiresAt,
  AppNeedsAuthorization,
  connectHint,
  isRefusal,
  oauthErrorText,
  refreshDue,
} from '../domain/oauth.js';
import { appData, partsOne, SOURCE } from '../handlers/common.js';
import { McpExchangeError } from '../mcp/session.js';
import * as apps from '../repo/apps.js';
import type { AppRow } from '../repo/apps.js';
import { findOAuth, forgetTokens, lockTokens, saveTokens, type OAuthRow } from '../repo/oauth.js';
import { oauthFetch, refreshTokens, resourceOf, type Connection } from './flow.js';

/** An access token to send, the version of the stored tokens it is from, and the tokens to keep out of texts. */
export interface UsableToken {
  accessToken: string;
  version: number;
  secrets: string[];
}

export interface AppTokensOptions {
  pool: Pool;
  keyring: Keyring;
  egress: EgressPolicy;
  clock: Clock;
  /** One token request's time (a refresh, a revocation). */
  timeoutMs: number;
}

const usable = (row: OAuthRow, tokens: OAuthTokens): UsableToken => ({
  accessToken: tokens.access_token,
  version: row.token_version,
  secrets: [tokens.access_token, ...(tokens.refresh_token ? [tokens.refresh_token] : [])],
});

/** The stored parts of an app's connection that token requests need (undefined: never discovered). */
export function connectionOf(keyring: Keyring, app: AppRow, row: OAuthRow): Connection | undefined {
  const { client } = oauthClient(keyring, app, row);
  if (!row.discovery || !client) return undefined;
  return { discovery: row.discovery, client, resource: resourceOf(row.discovery) };
}

export class AppTokens {
  constructor(private readonly o: AppTokensOptions) {}

  /** The access token to send now: the stored one, or a fresh one when it expires within a minute. */
  async current(app: AppRow, ctx: EventContext): Promise<UsableToken> {
    const row = await findOAuth(this.o.pool, app.tenant_id, app.id);
    const tokens = row && openTokens(this.o.keyring, row);
    if (!row || !tokens)
      throw await this.needsAuthorization(app, `the app is not connected; ${connectHint(app.slug)}`, ctx);
    if (refreshDue(row.access_token_expires_at, this.o.clock.now())) return this.refresh(app, row.token_version, ctx);
    return usable(row, tokens);
  }

  /**
   * Refreshes the tokens of version `seen` (the ones that expire, or that a server refused). One
   * replica at a time: a replica that waited for another's refresh takes its tokens instead of
   * spending the refresh token a second time. The transaction outlives the caller's signal on
   * purpose: a refresh token the server rotated must be stored, or it is lost.
   */
  async refresh(app: AppRow, seen: number, ctx: EventContext): Promise<UsableToken> {
    const { pool, keyring, egress, clock, timeoutMs } = this.o;
    const outcome = await withTransaction(
      pool,
      async (tx): Promise<{ token: UsableToken } | { refused: string }> => {
        await lockTokens(tx, app.id, timeoutMs + 5_000);
        const row = await findOAuth(tx, app.tenant_id, app.id);
        const tokens = row && openTokens(keyring, row);
        if (!row || !tokens) return { refused: `the app is not connected; ${connectHint(app.slug)}` };
        if (row.token_version !== seen) return { token: usable(row, tokens) }; // refreshed (or connected) meanwhile
        const connection = connectionOf(keyring, app, row);
        if (!tokens.refresh_token || !connection) {
          await forgetTokens(tx, app.tenant_id, app.id);
          return {
            refused: `the access token expired and the authorization server gave no refresh token; ${connectHint(app.slug)}`,
          };
        }
        let fresh: OAuthTokens;
        try {
          fresh = await refreshTokens(connection, tokens.refresh_token, oauthFetch(egress, timeoutMs));
        } catch (err) {
          const secrets = usable(row, tokens).secrets;
          if (!isRefusal(err))
            throw new McpExchangeError({
              status: 'unreachable',
              reason: redact(
                `the authorization server could not be reached to refresh the access token (${(err as Error).message}); it is tried again at the next call or probe`,
                secrets,
              ),
            });
          await forgetTokens(tx, app.tenant_id, app.id);
          return {
            refused: redact(
              `the authorization server refused to refresh the access token (${oauthErrorText(err)}); ${connectHint(app.slug)}`,
              secrets,
            ),
          };
        }
        const now = clock.now();
        const saved = await saveTokens(
          tx,
          app.tenant_id,
          app.id,
          { ...sealTokens(keyring, app.tenant_id, app.id, fresh), expiresAt: accessTokenExpiresAt(fresh, now) },
          { overVersion: seen },
        );
        if (!saved) throw new Error(`the tokens of app ${app.id} changed under the refresh lock`);
        return { token: usable(saved, fresh) };
      },
      { attempts: 1 },
    );
    if ('refused' in outcome) throw await this.needsAuthorization(app, outcome.refused, ctx);
    return outcome.token;
  }

  /** Records that the app needs authorization (unless it says so already) and returns the error to throw. */
  private async needsAuthorization(app: AppRow, reason: string, ctx: EventContext): Promise<AppNeedsAuthorization> {
    if (app.status === 'needs_authorization') return new AppNeedsAuthorization(app.status_reason ?? reason);
    await withTransaction(this.o.pool, async (tx) => {
      const current = await apps.findAppById(tx, app.tenant_id, app.id, 'update');
      if (current?.auth_type === 'oauth2' && current.status !== 'needs_authorization')
        await writeNeedsAuthorization(tx, current, reason, ctx);
    });
    return new AppNeedsAuthorization(reason);
  }
}

/**
 * Sets an oauth2 app `needs_authorization` with the reason, and records `app.authorization_required`
 * when it was not already (a probe that finds it so again records nothing).
 */
export async function writeNeedsAuthorization(
  tx: PoolClient,
  current: AppRow,
  reason: string,
  ctx: EventContext,
): Promise<AppRow> {
  // A probe that started with the old token writes nothing over this (its target moved).
  const row = await apps.updateApp(tx, current.tenant_id, current.id, {
    status: 'needs_authorization',
    status_reason: reason,
    target_version: current.target_version + 1,
  });
  if (current.status !== 'needs_authorization')
    await recordEvent(tx, SOURCE, ctx, {
      type: 'app.authorization_required',
      resourceType: 'app',
      resourceId: row.id,
      data: appData(row, await partsOne(tx, row)),
      metadata: { previous_status: current.status, status_reason: reason },
    });
  return row;
}
