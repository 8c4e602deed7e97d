import type { Handlers } from '@workauto/grpc';
import type { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import { accessPolicyHandlers } from './access-policies.js';
import { apiKeyHandlers } from './api-keys.js';
import { auditHandlers } from './audit.js';
import type { IdentityDeps } from './common.js';
import { integrationKeyHandlers } from './integration-keys.js';
import { invitationHandlers } from './invitations.js';
import { memberHandlers } from './members.js';
import { oauthHandlers } from './oauth.js';

export type { IdentityDeps } from './common.js';

/** Every rpc of IdentityService; each area's handlers live in the file of its name. */
export function identityHandlers(deps: IdentityDeps): Handlers<typeof IdentityServiceService> {
  return {
    ...memberHandlers(deps),
    ...accessPolicyHandlers(deps),
    ...invitationHandlers(deps),
    ...apiKeyHandlers(deps),
    ...integrationKeyHandlers(deps),
    ...oauthHandlers(deps),
    ...auditHandlers(deps),
  };
}
