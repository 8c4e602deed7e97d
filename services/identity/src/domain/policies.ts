import * as grpc from '@grpc/grpc-js';
import { DomainError, levelAtLeast } from '@workauto/grpc';
import { DOMAINS, LEVELS, type Domain, type Level } from './access.js';

/** A policy as granted: a domain's level, for every record of the domain (no resource filter). */
export interface PolicyInput {
  domain: Domain;
  access_level: Level;
}

/**
 * Resource filters are refused until a filter language exists and is enforced: one that was stored
 * but not enforced would let an admin believe a member's access was narrower than it is. null or
 * {} means "no filter" and is accepted.
 */
export function assertNoResourceFilters(
  field: string,
  policies: { resource_filter?: Record<string, unknown> | undefined }[],
): void {
  const violations = policies.flatMap((p, i) =>
    p.resource_filter && Object.keys(p.resource_filter).length
      ? [
          {
            field: `${field}[${i}].resource_filter`,
            description:
              'resource filters are not supported yet; send null or {} (the level applies to every record of the domain)',
          },
        ]
      : [],
  );
  if (violations.length)
    throw new DomainError(
      grpc.status.INVALID_ARGUMENT,
      'RESOURCE_FILTER_UNSUPPORTED',
      `${violations.map((v) => v.field).join(', ')}: resource filters are not supported yet; send null or {} and narrow access with the access level instead`,
      { fieldViolations: violations },
    );
}

/** Field violations of a policy set: known domain and level, each domain once. */
export function policyViolations(
  field: string,
  policies: { domain: string; access_level: string | undefined }[],
): { field: string; description: string }[] {
  const out: { field: string; description: string }[] = [];
  const seen = new Set<string>();
  policies.forEach((p, i) => {
    if (!(DOMAINS as readonly string[]).includes(p.domain))
      out.push({ field: `${field}[${i}].domain`, description: `must be one of ${DOMAINS.join(', ')}` });
    else if (seen.has(p.domain))
      out.push({ field: `${field}[${i}].domain`, description: `${p.domain} appears twice; give each domain once` });
    seen.add(p.domain);
    if (!p.access_level || !(LEVELS as readonly string[]).includes(p.access_level)) {
      out.push({ field: `${field}[${i}].access_level`, description: `must be one of ${LEVELS.join(', ')}` });
    }
  });
  return out;
}

export function atLeast(have: Level | undefined, need: Level): boolean {
  return levelAtLeast(have ?? 'none', need);
}
