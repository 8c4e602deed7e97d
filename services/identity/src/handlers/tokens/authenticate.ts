import { errors } from '@workauto/grpc';
import { sha256Hex, secretsEqual } from '@workauto/crypto';
import { ActorType, MemberRole } from '@workauto/protos/workauto/identity/v1/identity.js';
import { effectiveAccess } from '../../domain/access.js';
import * as apiKeys from '../../repo/api-keys.js';
import * as policies from '../../repo/access-policies.js';
import { levels, roles, type IdentityDeps, type Handler } from '../common.js';

export function authenticateToken({ pool, platformAdminToken }: IdentityDeps): Handler<'authenticateToken'> {
  return async (req) => {
    const token = req.token;
    if (token && secretsEqual(token, platformAdminToken)) {
      return {
        actor_type: ActorType.ACTOR_TYPE_PLATFORM_ADMIN,
        actor_id: 'platform',
        tenant_id: '',
        member_id: '',
        role: MemberRole.MEMBER_ROLE_UNSPECIFIED,
        access: {},
      };
    }
    if (!token.startsWith('wk_'))
      throw errors.unauthenticated(
        'INVALID_CREDENTIAL',
        'the bearer token is not a valid API key; check the key or create a new one',
      );
    const cred = await apiKeys.findCredential(pool, sha256Hex(token));
    if (!cred)
      throw errors.unauthenticated(
        'INVALID_CREDENTIAL',
        'the API key is invalid, revoked, or its member is deactivated',
      );
    const overrides = await policies.listPolicies(pool, cred.tenant_id, cred.member_id);
    const access = Object.fromEntries(
      Object.entries(effectiveAccess(cred.role, overrides)).map(([d, l]) => [d, levels.fromDomain(l)]),
    );
    return {
      actor_type: ActorType.ACTOR_TYPE_API_KEY,
      actor_id: cred.key_id,
      tenant_id: cred.tenant_id,
      member_id: cred.member_id,
      role: roles.fromDomain(cred.role),
      access,
    };
  };
}
