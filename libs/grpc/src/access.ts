/**
 * Access levels by domain (docs/api.md §3), as the gateway resolved them for the calling member and
 * signed into the caller identity. Services read them where a rule goes beyond the route's own
 * policy: records of several domains behind one route (webhook events), or work that acts in other
 * domains (an agent run's tools).
 *
 * It loads nothing OpenTelemetry instruments (no grpc-js): the gateway's route table reads it
 * before telemetry starts (`@workauto/grpc/access`).
 */
import { AccessLevel as ProtoAccessLevel } from '@workauto/protos/workauto/api/v1/policy.js';
import { enumMapping } from './enums.js';

/**
 * The access levels, lowest first: the names of workauto.api.v1.AccessLevel (policy.proto), each
 * including the ones before it (a test holds the two equal).
 */
export const LEVELS = ['none', 'read', 'write', 'admin'] as const;
export type AccessLevel = (typeof LEVELS)[number];

let protoLevels: ReturnType<typeof enumMapping<typeof ProtoAccessLevel>> | undefined;

/** workauto.api.v1.AccessLevel ↔ its name, from the descriptor (read at the first use). */
export const protoAccessLevel = {
  /** The level of a proto value: UNSPECIFIED (not set) is none; undefined for a number the proto does not have. */
  toLevel(value: number | undefined): AccessLevel | undefined {
    if (!value) return 'none';
    return (protoLevels ??= enumMapping(ProtoAccessLevel)).toDomain(value) as AccessLevel | undefined;
  },
  fromLevel(level: AccessLevel): ProtoAccessLevel {
    return (protoLevels ??= enumMapping(ProtoAccessLevel)).fromDomain(level);
  },
};

/**
 * The domains (docs/api.md §3), which policy.proto's Policy.domain names: the gateway refuses
 * to route an rpc whose policy names another.
 */
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

export function isAccessLevel(value: unknown): value is AccessLevel {
  return (LEVELS as readonly unknown[]).includes(value);
}

export function isDomain(value: unknown): value is Domain {
  return (DOMAINS as readonly unknown[]).includes(value);
}

/** Whether `have` is at least `need`. */
export function levelAtLeast(have: AccessLevel, need: AccessLevel): boolean {
  return LEVELS.indexOf(have) >= LEVELS.indexOf(need);
}

/**
 * Whether a caller with `access` may act at `need` in `domain`. `undefined` access is a caller the
 * gateway did not sign for a member (a service acting for a scheduled run, the platform): its rpc's
 * own checks are all there is.
 */
export function allows(access: AccessLevels | undefined, domain: Domain, need: AccessLevel): boolean {
  return access === undefined || levelAtLeast(access[domain] ?? 'none', need);
}
