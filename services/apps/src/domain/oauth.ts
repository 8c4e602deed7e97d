/**
 * OAuth apps' rules that need no I/O (docs/apps.md "OAuth"): how long a consent flow lives, when an
 * access token is refreshed, whether a failed token request is the authorization server's
 * judgement (the grant is gone) or an outage (retry later), and the texts an admin reads.
 */
import {
  OAuthError,
  ServerError,
  TemporarilyUnavailableError,
  TooManyRequestsError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

/** A consent flow's state is single-use and expires after 10 minutes. */
export const STATE_TTL_MS = 10 * 60_000;
/** An access token is refreshed when it has less than this left (and on a 401 whatever it says). */
const REFRESH_MARGIN_MS = 60_000;

/** When the access token expires, from the token response's expires_in; null when it gave none. */
export function accessTokenExpiresAt(tokens: Pick<OAuthTokens, 'expires_in'>, now: Date): Date | null {
  const seconds = tokens.expires_in;
  return typeof seconds === 'number' && Number.isFinite(seconds) && seconds > 0
    ? new Date(now.getTime() + seconds * 1000)
    : null;
}

/** Whether a token expiring at `expiresAt` is refreshed before it is used at `now`. */
export const refreshDue = (expiresAt: Date | null, now: Date) =>
  expiresAt !== null && expiresAt.getTime() - now.getTime() <= REFRESH_MARGIN_MS;

/**
 * Whether a failed request to the authorization server was a refusal of what we sent (an OAuth
 * error such as invalid_grant or invalid_client: sending it again gets the same answer) rather
 * than an outage (unreachable, timed out, a 5xx, `server_error`, `temporarily_unavailable`, 429,
 * an answer that is no OAuth answer): an outage keeps the tokens and is worth a retry.
 */
export function isRefusal(err: unknown): err is OAuthError {
  return (
    err instanceof OAuthError &&
    !(err instanceof ServerError || err instanceof TemporarilyUnavailableError || err instanceof TooManyRequestsError)
  );
}

/** An OAuth error as a short text: `invalid_grant: the refresh token was revoked`. */
export function oauthErrorText(err: OAuthError): string {
  return err.message ? `${err.errorCode}: ${err.message}` : err.errorCode;
}

/**
 * The `reason` a callback sends the browser back with: an OAuth error code as the authorization
 * server gave it when it is one (`access_denied`, `invalid_grant`), else a generic one. Only
 * `[a-z0-9_]`: it goes into a URL another application reads.
 */
export function callbackReason(code: string | undefined, fallback: string): string {
  return code !== undefined && /^[a-z0-9_]{1,64}$/.test(code) ? code : fallback;
}

/** What an admin does about an app that needs authorization. */
export const connectHint = (slug: string) =>
  `an admin connects it with POST /api/v1/apps/${slug}/oauth/authorize and the consent in a browser`;

/** An oauth2 app has no usable token: an admin must connect it (again). */
export class AppNeedsAuthorization extends Error {
  override name = 'AppNeedsAuthorization';
  constructor(readonly reason: string) {
    super(reason);
  }
}
