/**
 * Who may give whom which role and access (docs/api.md §3, docs/identity.md "Roles, access levels and grants"): nobody changes their own role or access
 * policies, nobody grants a role or an access level above their own, and nobody changes, removes or
 * impersonates a member who outranks them. Pure rules; the handlers load the members and call them.
 */
import * as grpc from '@grpc/grpc-js';
import { DomainError, errors } from '@workauto/grpc';
import { DOMAINS, type Domain, type Level, type Role } from './access.js';
import { atLeast } from './policies.js';

/** owner > admin > member > viewer. */
const ROLE_RANK: Record<Role, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };

/** The member making a change: who it is, its role and its effective access. */
export interface Grantor {
  id: string;
  role: Role;
  access: Record<Domain, Level>;
}

/** Nobody changes their own role or access policies: that is how a members admin would make itself everything. */
export function assertNotOwn(grantor: Grantor, memberId: string, what: 'role' | 'access policies'): void {
  if (grantor.id === memberId) {
    throw errors.permissionDenied(
      'OWN_ACCESS_CHANGE',
      `nobody changes their own ${what}; ask another admin or an owner to do it`,
    );
  }
}

/** Nobody grants a role above their own (an admin cannot make an owner, a member cannot make an admin). */
export function assertRoleWithin(grantor: Grantor, role: Role): void {
  if (ROLE_RANK[role] > ROLE_RANK[grantor.role]) {
    throw errors.permissionDenied(
      'ROLE_ABOVE_OWN',
      `a ${grantor.role} cannot grant the ${role} role; ask an owner${role === 'owner' ? '' : ' or admin'} to do it`,
    );
  }
}

/**
 * Nobody acts on a member who outranks them: an admin does not demote, deactivate, re-police or
 * hold keys of an owner (the owner would lose, or the admin gain, what the admin could not grant).
 */
export function assertNotOutranked(grantor: Grantor, target: { role: Role }, what: string): void {
  if (ROLE_RANK[target.role] > ROLE_RANK[grantor.role]) {
    throw errors.permissionDenied(
      'MEMBER_OUTRANKS_YOU',
      `a ${grantor.role} cannot ${what} of a ${target.role}; ask an owner${target.role === 'owner' ? '' : ' or admin'} to do it`,
    );
  }
}

/**
 * Nobody raises anyone's access in a domain above their own level there. Only raises count: a
 * level kept or lowered is no grant, so an admin may re-save a set an owner wrote.
 */
export function assertAccessWithin(
  grantor: Grantor,
  before: Readonly<Record<Domain, Level>>,
  after: Readonly<Record<Domain, Level>>,
): void {
  for (const domain of DOMAINS) {
    const raised = !atLeast(before[domain], after[domain]);
    if (raised && !atLeast(grantor.access[domain], after[domain])) {
      throw new DomainError(
        grpc.status.PERMISSION_DENIED,
        'ACCESS_ABOVE_OWN',
        `this would give ${after[domain]} access to ${domain}, above your own ${grantor.access[domain]}; grant at most ${grantor.access[domain]} there, or ask an owner`,
        { metadata: { domain, granted_level: after[domain], your_level: grantor.access[domain] } },
      );
    }
  }
}
