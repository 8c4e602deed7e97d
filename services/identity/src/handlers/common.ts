import type { Pool, Queryable } from '@workauto/db';
import { enumMapping, errors, type CallContext, type Handlers } from '@workauto/grpc';
import type { Keyring } from '@workauto/crypto';
import { AccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { resourceJson } from '@workauto/protos';
import {
  InvitationStatus,
  MemberRole,
  AccessPolicy,
  ApiKey,
  Invitation,
  IntegrationKey,
  ListAccessPoliciesResponse,
  Member,
  Tenant,
  type IdentityServiceService,
} from '@workauto/protos/workauto/identity/v1/identity.js';
import { effectiveAccess, type Domain, type Level } from '../domain/access.js';
import type { Grantor } from '../domain/grants.js';
import { invitationStatus } from '../domain/invitations.js';
import { atLeast } from '../domain/policies.js';
import type { OAuthProviders } from '../oauth.js';
import type { WriteLease } from '../write-lease.js';
import * as members from '../repo/members.js';
import * as policies from '../repo/access-policies.js';
import * as apiKeys from '../repo/api-keys.js';
import type { InvitationRow } from '../repo/invitations.js';
import type { IntegrationKeyRow } from '../repo/integration-keys.js';
import type { TenantRow } from '../repo/tenants.js';

export const SOURCE = 'identity';
export const roles = enumMapping(MemberRole);
export const levels = enumMapping(AccessLevel);
const invitationStatuses = enumMapping(InvitationStatus);

export interface IdentityDeps {
  pool: Pool;
  platformAdminToken: string;
  keyring: Keyring;
  oauth: OAuthProviders;
  /** How long gateways may authenticate writes from their cache; changes that may take a grant away are answered after it. */
  writeLease: WriteLease;
}

type H = Handlers<typeof IdentityServiceService>;
/** The handler of one rpc; each lives in handlers/<resource>/<verb>.ts and index.ts assembles them. */
export type Handler<K extends keyof H> = H[K];

export function toMember(row: members.MemberRow): Member {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    role: roles.fromDomain(row.role),
    is_active: row.is_active,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    email: row.email ?? undefined,
    contact_id: row.contact_id ?? undefined,
  };
}

export function toPolicy(row: policies.AccessPolicyRow): AccessPolicy {
  return { ...row, access_level: levels.fromDomain(row.access_level) };
}

export function toApiKey(row: apiKeys.ApiKeyRow, key?: string): ApiKey {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    member_id: row.member_id,
    name: row.name,
    key_hint: row.key_hint,
    created_at: row.created_at,
    updated_at: row.updated_at,
    revoked_at: row.revoked_at ?? undefined,
    api_key: key,
  };
}

export function toInvitation(row: InvitationRow, code?: string): Invitation {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    email: row.email,
    name: row.name ?? undefined,
    role: roles.fromDomain(row.role),
    status: invitationStatuses.fromDomain(invitationStatus(row)),
    access_policies: row.access_policies.map((p) => ({ ...p, access_level: levels.fromDomain(p.access_level) })),
    expires_at: row.expires_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
    claimed_at: row.claimed_at ?? undefined,
    revoked_at: row.revoked_at ?? undefined,
    member_id: row.member_id ?? undefined,
    code,
  };
}

export function toIntegrationKey(row: IntegrationKeyRow): IntegrationKey {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    provider: row.provider,
    status: row.status,
    metadata: { ...row.metadata, key_version: row.key_version },
    created_at: row.created_at,
    updated_at: row.updated_at,
    key_hint: row.key_hint ?? undefined,
    label: row.label ?? undefined,
    last_verified_at: row.last_verified_at ?? undefined,
  };
}

// Event data is the resource exactly as the REST API returns it (docs/events.md): the same
// message the handler returns, through the gateway's JSON mapping — so never a key, code or
// credential (the API never returns them outside their creation).
export const tenantData = (row: TenantRow) =>
  resourceJson(Tenant, { id: row.id, name: row.name, created_at: row.created_at });
export const memberData = (row: members.MemberRow) => resourceJson(Member, toMember(row));
export const apiKeyData = (row: apiKeys.ApiKeyRow) => resourceJson(ApiKey, toApiKey(row));
export const invitationData = (row: InvitationRow) => resourceJson(Invitation, toInvitation(row));
export const integrationKeyData = (row: IntegrationKeyRow) => resourceJson(IntegrationKey, toIntegrationKey(row));
/** A member's policies: `data` holds the list GET /members/{id}/access-policies returns. */
export const accessPoliciesData = (rows: policies.AccessPolicyRow[]) =>
  resourceJson(ListAccessPoliciesResponse, { data: rows.map(toPolicy) });

/** A member's effective access: its role's defaults with its policy rows applied. */
export async function accessOf(db: Queryable, member: members.MemberRow): Promise<Record<Domain, Level>> {
  return effectiveAccess(member.role, await policies.listPolicies(db, member.tenant_id, member.id));
}

/** The active member holding a live API key of the tenant, or nothing (key revoked or unknown, member deactivated). */
export async function liveKeyHolder(
  db: Queryable,
  tenantId: string,
  keyId: string,
): Promise<members.MemberRow | undefined> {
  const memberId = await apiKeys.lockLiveKey(db, tenantId, keyId);
  const member = memberId ? await members.findMember(db, tenantId, memberId) : undefined;
  return member?.is_active ? member : undefined;
}

/**
 * The calling member with its effective access, checked against the database, never a cache:
 * the API key the gateway authenticated (the actor) is unrevoked and its member active. Mutations
 * call it inside their transaction, so a key revoked through any gateway replica acts no more
 * (docs/api.md §2) and a revocation running concurrently waits for the key's lock.
 */
export async function caller(db: Queryable, ctx: CallContext): Promise<Grantor & { member: members.MemberRow }> {
  const actor = ctx.actor;
  const member = actor?.type === 'api_key' ? await liveKeyHolder(db, ctx.tenant, actor.id) : undefined;
  if (!member || member.id !== actor?.memberId) {
    throw errors.unauthenticated(
      'INVALID_CREDENTIAL',
      'the API key is revoked or its member is deactivated; use a live key of an active member',
    );
  }
  return { member, id: member.id, role: member.role, access: await accessOf(db, member) };
}

/** Acting on another member's credentials needs admin on members (docs/api.md §3). */
export function assertMembersAdmin(access: Record<Domain, Level>, what: string): void {
  if (!atLeast(access.members, 'admin')) {
    throw errors.permissionDenied('ACCESS_DENIED', `${what} needs the admin level on the members domain`);
  }
}
