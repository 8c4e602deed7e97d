import * as grpc from '@grpc/grpc-js';
import { DomainError } from '@workauto/grpc';

// OAuth 2.0 authorization code flow with PKCE S256 (and nonce for OIDC), via openid-client.

export const verifierContext = (stateHash: string) => `oauth_state:${stateHash}`;

export const unknownIdp = (idp: string) =>
  new DomainError(
    grpc.status.NOT_FOUND,
    'IDP_NOT_FOUND',
    `identity provider ${idp} is not configured; configure it in OAUTH_PROVIDERS`,
    { metadata: { idp } },
  );
