import * as grpc from '@grpc/grpc-js';
import * as client from 'openid-client';
import { withTransaction } from '@workauto/db';
import { DomainError, checkReturnTo, errors, validate } from '@workauto/grpc';
import { sha256Hex } from '@workauto/crypto';
import * as states from '../../repo/oauth-states.js';
import { isProviderOutage } from '../../oauth.js';
import { caller, type IdentityDeps, type Handler } from '../common.js';
import { verifierContext, unknownIdp } from './common.js';

const STATE_TTL_MS = 10 * 60_000;

export function startOAuthAuthorization({ pool, oauth, keyring }: IdentityDeps): Handler<'startOAuthAuthorization'> {
  return async (req, ctx) => {
    if (!oauth.has(req.idp)) throw unknownIdp(req.idp); // before the body (docs/identity.md "Integration keys and OAuth")
    checkReturnTo(validate(), 'return_to', req.return_to, oauth.settings.allowedReturnOrigins).done();
    const config = await oauth.configuration(req.idp).catch((err: unknown) => {
      if (isProviderOutage(err))
        throw errors.unavailable(
          'IDP_UNAVAILABLE',
          `identity provider ${req.idp} could not be reached (${(err as Error).message}); retry later`,
        );
      // The provider answered, with something that is no discovery document: a retry gets the same.
      throw new DomainError(
        grpc.status.INTERNAL,
        'IDP_MISCONFIGURED',
        `identity provider ${req.idp} cannot be used (${(err as Error).message}); an operator must check its issuer in OAUTH_PROVIDERS`,
        { metadata: { idp: req.idp } },
      );
    });
    const scopes = oauth.provider(req.idp).scopes;
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = scopes.includes('openid') ? client.randomNonce() : null;
    const stateHash = sha256Hex(state);
    const expiresAt = new Date(Date.now() + STATE_TTL_MS);
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: oauth.redirectUri(req.idp),
      scope: scopes.join(' '),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      ...(nonce ? { nonce } : {}),
    });
    await withTransaction(
      pool,
      async (tx) => {
        await caller(tx, ctx); // a revoked key starts nothing
        await states.insertOAuthState(tx, {
          state_hash: stateHash,
          tenant_id: ctx.tenant,
          idp: req.idp,
          connection_id: req.connection_id,
          return_to: req.return_to,
          code_verifier_cipher: keyring.encrypt(verifier, verifierContext(stateHash)),
          nonce,
          actor_type: 'api_key',
          actor_id: ctx.actor!.id,
          expires_at: expiresAt,
        });
      },
      { signal: ctx.signal },
    );
    return { authorize_url: url.href, expires_at: expiresAt, state };
  };
}
