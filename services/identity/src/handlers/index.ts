import type { Handlers } from '@workauto/grpc';
import type { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import type { IdentityDeps } from './common.js';
import { createApiKey } from './api-keys/create.js';
import { listApiKeys } from './api-keys/list.js';
import { revokeApiKey } from './api-keys/revoke.js';
import { exportAuditLog } from './audit-log/export.js';
import { listAuditLog } from './audit-log/list.js';
import { deleteIntegrationKey } from './integration-keys/delete.js';
import { getIntegrationKey } from './integration-keys/get.js';
import { listIntegrationKeys } from './integration-keys/list.js';
import { putIntegrationKey } from './integration-keys/put.js';
import { claimInvitation } from './invitations/claim.js';
import { createInvitation } from './invitations/create.js';
import { listInvitations } from './invitations/list.js';
import { revokeInvitation } from './invitations/revoke.js';
import { deactivateMember } from './members/deactivate.js';
import { getMember } from './members/get.js';
import { listAccessPolicies } from './members/list-access-policies.js';
import { listMembers } from './members/list.js';
import { replaceAccessPolicies } from './members/replace-access-policies.js';
import { updateMember } from './members/update.js';
import { completeOAuthAuthorization } from './oauth-authorizations/complete.js';
import { startOAuthAuthorization } from './oauth-authorizations/start.js';
import { createTenant } from './tenants/create.js';
import { authenticateToken } from './tokens/authenticate.js';
import { getRevocationEpoch } from './tokens/revocation-epoch.js';

export type { IdentityDeps } from './common.js';

/** Every rpc of IdentityService, one file per rpc: handlers/<resource>/<verb>.ts. */
export function identityHandlers(deps: IdentityDeps): Handlers<typeof IdentityServiceService> {
  // The changes that may take a grant away are answered once no gateway may still write with the
  // old grant from its cache (write-lease.ts); their commit bumps the revocation epoch (migration 0008).
  const afterLease = <A extends unknown[], R>(handler: (...args: A) => Promise<R>) =>
    deps.writeLease.answersAfterLease(handler);
  const update = updateMember(deps);
  const updateWithRole = afterLease(update);
  return {
    createTenant: createTenant(deps),
    listMembers: listMembers(deps),
    getMember: getMember(deps),
    // A rename or a new email changes no grant: only a role change waits.
    updateMember: (req, ctx) => (req.role ? updateWithRole : update)(req, ctx),
    deactivateMember: afterLease(deactivateMember(deps)),
    listAccessPolicies: listAccessPolicies(deps),
    replaceAccessPolicies: afterLease(replaceAccessPolicies(deps)),
    createInvitation: createInvitation(deps),
    listInvitations: listInvitations(deps),
    revokeInvitation: revokeInvitation(deps),
    claimInvitation: claimInvitation(deps),
    listApiKeys: listApiKeys(deps),
    createApiKey: createApiKey(deps),
    revokeApiKey: afterLease(revokeApiKey(deps)),
    listIntegrationKeys: listIntegrationKeys(deps),
    getIntegrationKey: getIntegrationKey(deps),
    putIntegrationKey: putIntegrationKey(deps),
    deleteIntegrationKey: deleteIntegrationKey(deps),
    startOAuthAuthorization: startOAuthAuthorization(deps),
    completeOAuthAuthorization: completeOAuthAuthorization(deps),
    listAuditLog: listAuditLog(deps),
    exportAuditLog: exportAuditLog(deps),
    authenticateToken: authenticateToken(deps),
    getRevocationEpoch: getRevocationEpoch(deps),
  };
}
