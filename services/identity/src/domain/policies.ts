import { DOMAINS, LEVELS, type Domain, type Level } from './access.js';

export interface PolicyInput {
  domain: Domain;
  access_level: Level;
  resource_filter: Record<string, unknown>;
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

const RANK: Record<Level, number> = { none: 0, read: 1, write: 2, admin: 3 };
export function atLeast(have: Level | undefined, need: Level): boolean {
  return RANK[have ?? 'none'] >= RANK[need];
}
