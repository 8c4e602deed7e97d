/**
 * Guardrails (docs/agents.md "Configs"): rules a tenant puts on a blueprint's runs. Validation names the
 * element and field of a bad rule (`guardrails[2].pattern`); the rest are the pure checks the
 * executor applies. Every check runs in time linear in what it reads (no backtracking), so one
 * tenant's rules cannot hold the service's thread while other tenants wait.
 */
import { RE2JS } from 're2js';

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
  /** RE2 instructions a config's block_pattern rules compile to, together: what checking an answer costs per character. */
  patternProgram: 2_000,
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
  // Patterns are compiled in order until one is past what is left of their budget; the rest wait for the next PUT.
  let programBudget = GUARDRAIL_LIMITS.patternProgram;
  let budgetSpent = false;
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
        } else if (!budgetSpent) {
          const compiled = compilePattern(value, programBudget);
          if ('error' in compiled) {
            out.push({ field: path, description: compiled.error });
            budgetSpent = compiled.tooLarge;
          } else programBudget -= compiled.re.programSize();
        }
        break;
    }
  });
  return out;
}

/**
 * Whether `name` matches `glob` as a whole: `*` any run of characters, `?` exactly one, the rest
 * literally. Greedy, with two pointers: a mismatch goes back only to just after the last `*`, so
 * the work is at most name × glob characters (16,384 for the longest of each), never the
 * exponential backtracking of a regex such as `^.*.*.*Z$`.
 */
export function globMatches(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  let star = -1; // the glob index just after the last `*` seen
  let resume = 0; // the name index that `*` will swallow up to on the next mismatch
  while (n < name.length) {
    const c = glob[g];
    if (c === '*') {
      star = ++g;
      resume = n;
    } else if (c !== undefined && (c === '?' || c === name[n])) {
      g++;
      n++;
    } else if (star >= 0) {
      g = star;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (glob[g] === '*') g++;
  return g === glob.length;
}

const matchesAny = (name: string, globs: string[]) => globs.some((g) => globMatches(g, name));

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

/** A config's block_pattern, compiled; `index` is its rule's position in the guardrails. */
export interface BlockPattern {
  index: number;
  re: RE2JS;
}

const RE2_LIMITS =
  'guardrails use RE2 syntax, which matches in linear time and so has no backreferences (\\1) and no lookaround ((?=, (?!, (?<=, (?<!)';

/**
 * An estimate from the text alone of the RE2 instructions a pattern compiles to: every atom counts
 * one and a counted repetition multiplies what it repeats. Compiling takes time in proportion to
 * the instructions (`x{999}` written 166 times: 166,000 of them, seconds), so a pattern far over
 * the budget is refused before the compiler sees it; the compiled programSize() decides the rest.
 */
function patternSizeEstimate(pattern: string): number {
  const outer: { alternatives: number; sequence: number }[] = [];
  let alternatives = 0; // sizes of the finished alternatives of the current group
  let sequence = 0; // the current alternative, without its last atom
  let last = 0; // the last atom: what a quantifier repeats
  const atom = (size: number) => {
    sequence += last;
    last = size;
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      const next = pattern[i + 1];
      if (next === 'Q') {
        // \Q…\E: literal text, one instruction per character
        const end = pattern.indexOf('\\E', i + 2);
        const stop = end < 0 ? pattern.length : end;
        atom(stop - i - 2);
        i = end < 0 ? pattern.length : end + 1;
      } else {
        if ((next === 'p' || next === 'P' || next === 'x') && pattern[i + 2] === '{') {
          const end = pattern.indexOf('}', i + 3);
          i = end < 0 ? pattern.length : end;
        } else i++;
        atom(1);
      }
    } else if (c === '[') {
      let j = i + 1;
      if (pattern[j] === '^') j++;
      if (pattern[j] === ']') j++;
      for (; j < pattern.length && pattern[j] !== ']'; j++) {
        if (pattern[j] === '\\') j++;
        else if (pattern[j] === '[' && pattern[j + 1] === ':') {
          const end = pattern.indexOf(':]', j + 2);
          if (end >= 0) j = end + 1;
        }
      }
      i = j;
      atom(1);
    } else if (c === '(') {
      outer.push({ alternatives, sequence: sequence + last });
      alternatives = sequence = last = 0;
    } else if (c === ')' && outer.length) {
      const size = alternatives + sequence + last + 2;
      ({ alternatives, sequence } = outer.pop()!);
      last = size;
    } else if (c === '|') {
      alternatives += sequence + last + 1;
      sequence = last = 0;
    } else if (c === '*' || c === '+' || c === '?') {
      last += 1;
    } else if (c === '{' && /^\{\d+(,\d*)?\}/.test(pattern.slice(i, i + 12))) {
      const [text, min, range] = /^\{(\d+)(,\d*)?\}/.exec(pattern.slice(i, i + 12))!;
      const max = range === undefined ? Number(min) : range === ',' ? Number(min) + 1 : Number(range.slice(1));
      last = last * Math.max(1, max) * (range === undefined ? 1 : 2);
      i += text.length - 1;
    } else {
      atom(1);
    }
  }
  while (outer.length) {
    const size = alternatives + sequence + last + 2;
    ({ alternatives, sequence } = outer.pop()!);
    last = size;
  }
  return alternatives + sequence + last;
}

/** One pattern compiled by RE2 within `budget` instructions, or why it cannot be (a sentence that says what to change). */
function compilePattern(pattern: string, budget: number): { re: RE2JS } | { error: string; tooLarge: boolean } {
  const tooLarge = (size: string) => ({
    error: `is too large to check cheaply: it compiles to ${size} RE2 instructions, and a config's block_pattern rules may take ${GUARDRAIL_LIMITS.patternProgram} together (${budget} left for this one; a{n} counts n times); shorten its counted repetitions or drop a rule`,
    tooLarge: true,
  });
  const estimate = patternSizeEstimate(pattern);
  if (estimate > 4 * budget) return tooLarge(`about ${estimate}`);
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (err) {
    return {
      error: `is not a regular expression RE2 accepts (${(err as Error).message}); ${RE2_LIMITS}`,
      tooLarge: false,
    };
  }
  return re.programSize() > budget ? tooLarge(String(re.programSize())) : { re };
}

/**
 * The block_pattern rules compiled for a run, or the first that cannot be: a config stored before
 * patterns were checked with RE2 may hold one it refuses (lookaround, a backreference).
 */
export function blockPatterns(rules: Guardrail[]): { patterns: BlockPattern[] } | { index: number; error: string } {
  const patterns: BlockPattern[] = [];
  let budget = GUARDRAIL_LIMITS.patternProgram;
  for (const [index, rule] of rules.entries()) {
    if (rule.type !== 'block_pattern') continue;
    const compiled = compilePattern(rule.pattern, budget);
    if ('error' in compiled) return { index, error: compiled.error };
    budget -= compiled.re.programSize();
    patterns.push({ index, re: compiled.re });
  }
  return { patterns };
}

/** The index of the first block_pattern rule the text matches (anywhere in it), if any. */
export function blockedBy(patterns: BlockPattern[], text: string): number | undefined {
  return patterns.find((p) => p.re.test(text))?.index;
}
