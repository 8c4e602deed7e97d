import * as client from 'openid-client';
import { withTransaction } from '@workauto/db';
import { errors, returnToWith } from '@workauto/grpc';
import { sha256Hex } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import * as states from '../../repo/oauth-states.js';
import { isProviderOutage } from '../../oauth.js';
import { SOURCE, integrationKeyData, liveKeyHolder, type IdentityDeps, type Handler } from '../common.js';
import { storeCredential } from '../integration-keys/common.js';
import { verifierContext, unknownIdp } from './common.js';

export function completeOAuthAuthorization(deps: IdentityDeps): Handler<'completeOAuthAuthorization'> {
  const { pool, oauth, keyring } = deps;
  return async (req, ctx) => {
    if (!oauth.has(req.idp)) throw unknownIdp(req.idp);
    if (!req.state)
      throw errors.invalidField('state', 'is required: start again with POST /api/v1/oauth/{idp}/authorize');
    const stateHash = sha256Hex(req.state);
    const pending = await states.consumeOAuthState(pool, stateHash, req.idp);
    if (!pending)
      throw errors.invalidField(
        'state',
        'is unknown, expired or already used: start again with POST /api/v1/oauth/{idp}/authorize',
      );
    const back = (params: Record<string, string>) => returnToWith(pending.return_to, params);
    if (req.error || !req.code)
      return back({ status: 'error', error: req.error ?? 'missing_code', connection_id: pending.connection_id });
    const current = new URL(oauth.redirectUri(req.idp));
    current.searchParams.set('code', req.code);
    current.searchParams.set('state', req.state);
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(await oauth.configuration(req.idp), current, {
        pkceCodeVerifier: keyring.decrypt(pending.code_verifier_cipher, verifierContext(stateHash)),
        expectedState: req.state,
        ...(pending.nonce ? { expectedNonce: pending.nonce, idTokenExpected: true } : {}),
      });
    } catch (err) {
      if (isProviderOutage(err)) {
        // The provider never judged the code: the state is released so the same callback can be retried.
        await states.releaseOAuthState(pool, stateHash);
        throw errors.unavailable(
          'IDP_UNAVAILABLE',
          `identity provider ${req.idp} could not be reached (${(err as Error).message}); retry this callback in a minute, or start again with POST /api/v1/oauth/{idp}/authorize`,
        );
      }
      // The provider refused the code (expired, replayed, wrong verifier): the user starts again.
      return back({
        status: 'error',
        error: (err as { error?: string }).error ?? 'token_exchange_failed',
        connection_id: pending.connection_id,
      });
    }
    const credential = JSON.stringify({
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token,
      id_token: tokens.id_token,
      token_type: tokens.token_type,
      scope: tokens.scope,
      expires_at: tokens.expires_in ? Date.now() + tokens.expires_in * 1000 : undefined,
    });
    const actorCtx = {
      ...ctx,
      tenantId: pending.tenant_id,
      actor: { type: pending.actor_type, id: pending.actor_id },
    };
    // No signal: the single-use code is already exchanged, so keeping its tokens beats dropping them.
    const stored = await withTransaction(pool, async (tx) => {
      // The key that started the flow must still be live: a revoked key connects nothing (docs/api.md §2).
      if (pending.actor_type !== 'api_key' || !(await liveKeyHolder(tx, pending.tenant_id, pending.actor_id)))
        return false;
      const row = await storeCredential(deps, tx, pending.tenant_id, req.idp, credential, {
        label: null,
        metadata: { connection_id: pending.connection_id, kind: 'oauth', scope: tokens.scope ?? null },
        verified: true,
      });
      await recordEvent(tx, SOURCE, actorCtx, {
        type: 'integration_key.updated',
        resourceType: 'integration_key',
        resourceId: row.id,
        data: integrationKeyData(row),
        metadata: { provider: req.idp, connection_id: pending.connection_id, via: 'oauth' },
      });
      return true;
    });
    if (!stored) return back({ status: 'error', error: 'access_revoked', connection_id: pending.connection_id });
    return back({ status: 'connected', connection_id: pending.connection_id });
  };
}
