import { errors } from '@workauto/grpc';
import type { Role } from './access.js';

/** Only an owner makes or unmakes an owner. */
export function assertMayChangeRole(callerRole: Role | undefined, from: Role, to: Role): void {
  if ((from === 'owner' || to === 'owner') && from !== to && callerRole !== 'owner') {
    throw errors.permissionDenied('OWNER_ROLE_REQUIRED', 'only an owner can make or unmake an owner');
  }
}

/** A tenant always keeps at least one active owner: demoting or deactivating the last one is refused. */
export function assertKeepsAnOwner(activeOwnerIds: string[], memberId: string): void {
  if (activeOwnerIds.length === 1 && activeOwnerIds[0] === memberId) {
    throw errors.failedPrecondition(
      'LAST_OWNER',
      'this member is the last active owner of the tenant; make another member owner first',
    );
  }
}
