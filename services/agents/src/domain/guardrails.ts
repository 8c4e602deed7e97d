/**
 * Guardrails (contract §5 Agents): rules a tenant puts on a blueprint's runs. Validation names the
 * element and field of a bad rule (`guardrails[2].pattern`); the rest are the pure checks the
 * executor applies.
 */
export type Guardrail =
  | { type: 'allow_tools'; tools: string[] }
  | { type: 'deny_tools'; tools: string[] }
  | { type: 'max_tool_calls'; value: number }
  | { type: 'max_output_chars'; value: number }
  | { type: 'block_pattern'; pattern: string };

export interface Violation {
  field: string;
  description: string;
}

export const GUARDRAIL_LIMITS = {
  rules: 50,
  tools: 100,
  toolName: 128,
  pattern: 1_000,
  maxToolCalls: 1_000,
  maxOutputChars: 1_000_000,
};

const TYPES = ['allow_tools', 'deny_tools', 'max_tool_calls', 'max_output_chars', 'block_pattern'] as const;
const FIELDS: Record<(typeof TYPES)[number], string> = {
  allow_tools: 'tools',
  deny_tools: 'tools',
  max_tool_calls: 'value',
  max_output_chars: 'value',
  block_pattern: 'pattern',
};
const TOOL_NAME = /^[A-Za-z0-9_*?-]+$/;

/** The violations of a guardrails array as sent; empty when every rule is well formed. */
export function guardrailViolations(rules: unknown[]): Violation[] {
  const out: Violation[] = [];
  if (rules.length > GUARDRAIL_LIMITS.rules)
    out.push({ field: 'guardrails', description: `must have at most ${GUARDRAIL_LIMITS.rules} rules` });
  rules.forEach((rule, i) => {
    const at = `guardrails[${i}]`;
    if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) {
      out.push({ field: at, description: 'must be an object like {"type": "deny_tools", "tools": ["create_*"]}' });
      return;
    }
    const r = rule as Record<string, unknown>;
    const type = r.type;
    if (typeof type !== 'string' || !(TYPES as readonly string[]).includes(type)) {
      out.push({ field: `${at}.type`, description: `must be one of ${TYPES.join(', ')}` });
      return;
    }
    const field = FIELDS[type as (typeof TYPES)[number]];
    for (const key of Object.keys(r)) {
      if (key !== 'type' && key !== field)
        out.push({
          field: `${at}.${key}`,
          description: `is not a field of a ${type} rule (it takes type and ${field})`,
        });
    }
    const value = r[field];
    const path = `${at}.${field}`;
    switch (type) {
      case 'allow_tools':
      case 'deny_tools':
        if (!Array.isArray(value) || value.length === 0 || value.length > GUARDRAIL_LIMITS.tools) {
          out.push({
            field: path,
            description: `must be an array of 1 to ${GUARDRAIL_LIMITS.tools} tool names or globs (e.g. "create_*", "crm-app__*")`,
          });
        } else {
          value.forEach((name, j) => {
            if (
              typeof name !== 'string' ||
              name.length === 0 ||
              name.length > GUARDRAIL_LIMITS.toolName ||
              !TOOL_NAME.test(name)
            ) {
              out.push({
                field: `${path}[${j}]`,
                description: `must be a tool name or glob of 1 to ${GUARDRAIL_LIMITS.toolName} letters, digits, _, -, * or ?`,
              });
            }
          });
        }
        break;
      case 'max_tool_calls':
      case 'max_output_chars': {
        const max = type === 'max_tool_calls' ? GUARDRAIL_LIMITS.maxToolCalls : GUARDRAIL_LIMITS.maxOutputChars;
        const min = type === 'max_tool_calls' ? 0 : 1;
        if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
          out.push({ field: path, description: `must be an integer from ${min} to ${max}` });
        }
        break;
      }
      case 'block_pattern':
        if (typeof value !== 'string' || value.length === 0 || value.length > GUARDRAIL_LIMITS.pattern) {
          out.push({
            field: path,
            description: `must be a regular expression of 1 to ${GUARDRAIL_LIMITS.pattern} characters`,
          });
        } else {
          try {
            new RegExp(value);
          } catch (err) {
            out.push({
              field: path,
              description: `is not a valid regular expression (${(err as Error).message}); write it as JavaScript's RegExp reads it`,
            });
          }
        }
        break;
    }
  });
  return out;
}

function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

const matchesAny = (name: string, globs: string[]) => globs.some((g) => globToRegExp(g).test(name));

/** Whether a tool may be offered and called: allowed by every allow_tools rule (if any) and denied by none. */
export function toolAllowed(rules: Guardrail[], name: string): boolean {
  for (const r of rules) {
    if (r.type === 'allow_tools' && !matchesAny(name, r.tools)) return false;
    if (r.type === 'deny_tools' && matchesAny(name, r.tools)) return false;
  }
  return true;
}

/** The smallest max_tool_calls of the rules, if any. */
export function maxToolCalls(rules: Guardrail[]): number | undefined {
  const values = rules.flatMap((r) => (r.type === 'max_tool_calls' ? [r.value] : []));
  return values.length ? Math.min(...values) : undefined;
}

/** The smallest max_output_chars of the rules, if any (the answer is cut to it). */
export function maxOutputChars(rules: Guardrail[]): number | undefined {
  const values = rules.flatMap((r) => (r.type === 'max_output_chars' ? [r.value] : []));
  return values.length ? Math.min(...values) : undefined;
}

/** The index of the first block_pattern rule the text matches, if any. */
export function blockedBy(rules: Guardrail[], text: string): number | undefined {
  const i = rules.findIndex((r) => r.type === 'block_pattern' && new RegExp(r.pattern).test(text));
  return i < 0 ? undefined : i;
}
