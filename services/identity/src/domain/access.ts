/** Roles, domains and access levels of docs/api.md §3, and how they combine. Pure rules. */

const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

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

export const LEVELS = ['none', 'read', 'write', 'admin'] as const;
export type Level = (typeof LEVELS)[number];

const everywhere = (level: Level): Record<Domain, Level> =>
  Object.fromEntries(DOMAINS.map((d) => [d, level])) as Record<Domain, Level>;

/** What someone who is not a member yet has: nothing anywhere. */
export const NO_ACCESS: Readonly<Record<Domain, Level>> = everywhere('none');

/** The level each role has in each domain when no access policy overrides it. */
const ROLE_DEFAULTS: Record<Role, Record<Domain, Level>> = {
  owner: everywhere('admin'),
  admin: everywhere('admin'),
  member: {
    ...everywhere('none'),
    calendar: 'write',
    crm: 'write',
    notes: 'write',
    tasks: 'write',
    agents: 'read',
    apps: 'read',
    members: 'read',
    webhooks: 'read',
  },
  viewer: {
    ...everywhere('none'),
    calendar: 'read',
    crm: 'read',
    notes: 'read',
    tasks: 'read',
    members: 'read',
  },
};

/** Effective level per domain: the role's default, replaced by the member's policy row where one exists. */
export function effectiveAccess(
  role: Role,
  overrides: { domain: string; access_level: string }[],
): Record<Domain, Level> {
  const access = { ...ROLE_DEFAULTS[role] };
  for (const o of overrides) {
    if ((DOMAINS as readonly string[]).includes(o.domain) && (LEVELS as readonly string[]).includes(o.access_level)) {
      access[o.domain as Domain] = o.access_level as Level;
    }
  }
  return access;
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
