import type { EventType } from './types.js';

/** Events of the identity service (docs/events.md § identity). */
export const IDENTITY_EVENT_TYPES: readonly EventType[] = [
  { name: 'tenant.created', description: 'A tenant was created: POST /admin/tenants' },
  {
    name: 'member.created',
    description: 'A member was created: POST /admin/tenants (the owner), POST /invitations/claim',
  },
  { name: 'member.updated', description: 'A member was updated: PATCH /members/{id}' },
  { name: 'member.deactivated', description: 'A member was deactivated: DELETE /members/{id}' },
  { name: 'invitation.created', description: 'An invitation was created: POST /invitations (never the code)' },
  { name: 'invitation.revoked', description: 'An invitation was revoked: DELETE /invitations/{id}' },
  { name: 'invitation.claimed', description: 'An invitation was claimed: POST /invitations/claim' },
  {
    name: 'access_policies.replaced',
    description: "A member's access policies were replaced: PUT /members/{id}/access-policies",
  },
  {
    name: 'api_key.created',
    description:
      'An api key was created: POST /api-keys (metadata member_id, name), tenant bootstrap, a claim (never the key)',
  },
  { name: 'api_key.revoked', description: 'An api key was revoked: DELETE /api-keys/{id}' },
  {
    name: 'integration_key.updated',
    description:
      'An integration key was updated: PUT /integration-keys/{provider}, an OAuth callback (never the credential)',
  },
  {
    name: 'integration_key.deleted',
    description: 'An integration key was deleted: DELETE /integration-keys/{provider}',
  },
];
