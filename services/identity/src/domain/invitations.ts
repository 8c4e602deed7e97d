import { errors } from '@workauto/grpc';

export type InvitationStatus = 'pending' | 'claimed' | 'revoked' | 'expired';

export const DEFAULT_EXPIRY_HOURS = 168;

export function invitationStatus(
  i: { claimed_at: Date | null; revoked_at: Date | null; expires_at: Date },
  now = new Date(),
): InvitationStatus {
  if (i.claimed_at) return 'claimed';
  if (i.revoked_at) return 'revoked';
  if (i.expires_at <= now) return 'expired';
  return 'pending';
}

/** Why a code cannot be claimed, as docs/identity.md "Invitations" gives its statuses: claimed 409, expired or revoked 410. */
export function assertClaimable(status: InvitationStatus): void {
  if (status === 'claimed')
    throw errors.failedPrecondition(
      'INVITATION_ALREADY_CLAIMED',
      'this invitation was already claimed; ask for a new one',
    );
  if (status === 'revoked')
    throw errors.failedPrecondition('INVITATION_REVOKED', 'this invitation was revoked; ask for a new one', 410);
  if (status === 'expired')
    throw errors.failedPrecondition('INVITATION_EXPIRED', 'this invitation has expired; ask for a new one', 410);
}
