import { errors } from '@workauto/grpc';

/** A tenant always keeps at least one active owner: demoting or deactivating the last one is refused. */
export function assertKeepsAnOwner(activeOwnerIds: string[], memberId: string): void {
  if (activeOwnerIds.length === 1 && activeOwnerIds[0] === memberId) {
    throw errors.failedPrecondition(
      'LAST_OWNER',
      'this member is the last active owner of the tenant; make another member owner first',
    );
  }
}
