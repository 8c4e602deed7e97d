/**
 * Access levels by domain (docs/api.md §3), as the gateway resolved them for the calling member and
 * signed into the caller identity. Services read them where a rule goes beyond the route's own
 * policy: records of several domains behind one route (webhook events), or work that acts in other
 * domains (an agent run's tools).
 */
import { errors } from './errors.js';

export type AccessLevel = 'none' | 'read' | 'write' | 'admin';

/** The domains of docs/api.md §3. */
export const DOMAINS = [
  'members',
  'audit',
  'agents',
  'apps',
  'calendar',
  'crm',
  'notes',
  'tasks',
  'webhooks',
  'integrations',
] as const;
export type Domain = (typeof DOMAINS)[number];

/** A member's effective level in each domain; a domain left out is `none`. */
export type AccessLevels = Partial<Record<Domain, AccessLevel>>;

const RANK: Record<AccessLevel, number> = { none: 0, read: 1, write: 2, admin: 3 };

export function isAccessLevel(value: unknown): value is AccessLevel {
  return typeof value === 'string' && Object.hasOwn(RANK, value);
}

/** Whether `have` is at least `need`. */
export function levelAtLeast(have: AccessLevel, need: AccessLevel): boolean {
  return RANK[have] >= RANK[need];
}

/**
 * Whether a caller with `access` may act at `need` in `domain`. `undefined` access is a caller the
 * gateway did not sign for a member (a service acting for a scheduled run, the platform): its rpc's
 * own checks are all there is.
 */
export function allows(access: AccessLevels | undefined, domain: Domain, need: AccessLevel): boolean {
  return access === undefined || levelAtLeast(access[domain] ?? 'none', need);
}

/** 403 ACCESS_DENIED in the gateway's words, for a rule a service checks itself. */
export function accessDenied(domain: Domain, need: AccessLevel, have: AccessLevel, what: string) {
  return errors.permissionDenied(
    'ACCESS_DENIED',
    `${what} needs ${need} access to ${domain}; your access there is ${have}. Ask an admin to change your role or access policy`,
    { domain, required_level: need, actual_level: have },
  );
}
