/**
 * Guardrail rules without I/O: glob semantics and their cost, and block_pattern under RE2 (what it
 * refuses, what it costs). A tenant's worst rule must not hold the service's one thread.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RE2JS } from 're2js';
import {
  GUARDRAIL_LIMITS,
  blockPatterns,
  blockedBy,
  globMatches,
  guardrailViolations,
  toolAllowed,
  type Guardrail,
} from './domain/guardrails.js';

/**
 * `text` as a string that counts the characters read from it into `reads`, and throws once they are
 * more than `budget` (a matcher that backtracks fails at once instead of running for years).
 */
function counted(text: string, reads: { n: number }, budget: number): string {
  return new Proxy(new String(text), {
    get(target, key) {
      if (key === 'length') return text.length;
      if (typeof key === 'string' && /^\d+$/.test(key)) {
        if (++reads.n > budget) throw new Error(`read more than ${budget} characters`);
        return text[Number(key)];
      }
      return Reflect.get(target, key) as unknown;
    },
  }) as unknown as string;
}

/** The glob semantics as they were defined before (a regex per glob), as the reference. */
function referenceGlob(glob: string, name: string): boolean {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`).test(name);
}

describe('tool globs', () => {
  it('match whole names: * any run of characters, ? exactly one, the rest literally', () => {
    const cases: [string, string, boolean][] = [
      ['list_tasks', 'list_tasks', true],
      ['list_tasks', 'list_tasks2', false],
      ['list_task', 'list_tasks', false],
      ['create_*', 'create_task', true],
      ['create_*', 'create_', true],
      ['create_*', 'list_tasks', false],
      ['*_tasks', 'list_tasks', true],
      ['*', 'anything', true],
      ['**', 'x', true],
      ['list_?asks', 'list_tasks', true],
      ['list_?asks', 'list_asks', false],
      ['?', 'ab', false],
      ['crm-app__*', 'crm-app__lookup', true],
      ['crm-app__*', 'crm-apps__lookup', false],
      ['a*b*c', 'aXbYc', true],
      ['a*b*c', 'acb', false],
      ['*a?c*', 'zzabcz', true],
      ['*ab', 'aab', true],
      ['a*a*a', 'aa', false],
    ];
    for (const [glob, name, expected] of cases)
      assert.equal(globMatches(glob, name), expected, `${glob} against ${name}`);
  });

  it('agree with the regex semantics they replace on 20,000 random globs and names', () => {
    // A seeded generator: the same cases every run.
    let seed = 42;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const pick = (alphabet: string, max: number) =>
      Array.from({ length: next(max + 1) }, () => alphabet[next(alphabet.length)]).join('');
    for (let i = 0; i < 20_000; i++) {
      const glob = pick('ab*?_', 8) || '*';
      const name = pick('ab_', 10) || 'a';
      assert.equal(globMatches(glob, name), referenceGlob(glob, name), `${glob} against ${name}`);
    }
  });

  it('stay cheap for the worst globs a config can hold: 128-character globs against 128-character names, at most glob × name characters read', () => {
    const max = GUARDRAIL_LIMITS.toolName;
    const globs = [
      `${'*'.repeat(max - 1)}Z`, // the pattern that froze the service as a regex
      `*${'a'.repeat(max / 2 - 1)}b${'*'.repeat(max / 2 - 1)}`,
      '*a'.repeat(max / 2),
      `*${'?'.repeat(max - 2)}Z`,
      `${'*?'.repeat(max / 2 - 1)}*Z`,
    ];
    const names = ['a'.repeat(max), `${'a'.repeat(max - 1)}b`, 'ab'.repeat(max / 2)];
    // The work is counted, not timed: a backtracking matcher needs years for the first pair.
    const matched: [number, number][] = [];
    for (const [gi, g] of globs.entries())
      for (const [ni, n] of names.entries()) {
        const budget = g.length * n.length;
        const reads = { n: 0 };
        if (globMatches(counted(g, reads, budget), counted(n, reads, budget))) matched.push([gi, ni]);
        assert.ok(reads.n <= budget, `${g} against ${n}: ${reads.n} characters read`);
      }
    // The a…b glob matches a×127 b, '*a'×64 matches a×128; names never end in Z.
    assert.deepEqual(matched, [
      [1, 1],
      [2, 0],
    ]);
  });

  it('decide which tools are offered: every allow_tools rule matches and no deny_tools rule does', () => {
    const rules: Guardrail[] = [
      { type: 'allow_tools', tools: ['list_*', 'create_task'] },
      { type: 'allow_tools', tools: ['*_tasks', 'create_*'] },
      { type: 'deny_tools', tools: ['create_note'] },
    ];
    assert.deepEqual(
      ['list_tasks', 'list_deals', 'create_task', 'create_note', 'search_notes'].filter((t) => toolAllowed(rules, t)),
      ['list_tasks', 'create_task'],
    );
  });
});

describe('block_pattern under RE2', () => {
  const violation = (pattern: string) =>
    guardrailViolations([
      { type: 'max_tool_calls', value: 3 },
      { type: 'block_pattern', pattern },
    ]);

  it('refuses what RE2 does not support with a 400 that says so: backreferences and lookaround', () => {
    for (const pattern of ['(a)\\1', '(?=secret)', '(?!x)y', '(?<=a)b', '(?<!a)b']) {
      const v = violation(pattern);
      assert.deepEqual(
        v.map((x) => x.field),
        ['guardrails[1].pattern'],
        pattern,
      );
      assert.match(v[0]!.description, /RE2/);
      assert.match(v[0]!.description, /backreferences.*lookaround|lookaround.*backreferences/);
    }
    assert.match(violation('(unclosed')[0]!.description, /missing closing \)/);
  });

  it('accepts the patterns a tenant writes, in RE2 syntax', () => {
    for (const pattern of [
      'SECRET-\\d+',
      '^(a+)+$',
      '(?i)(password|api[_-]?key)\\s*[:=]\\s*\\S+',
      'AKIA[0-9A-Z]{16}',
      '\\b[\\p{L}.]+@example\\.com\\b',
      '.{999}',
    ])
      assert.deepEqual(violation(pattern), [], pattern);
  });

  it("refuses patterns too big to check cheaply, without spending seconds compiling them (a config's patterns together)", (t) => {
    const huge = 'x{999}'.repeat(166); // about 166,000 RE2 instructions: seconds to compile
    const compile = t.mock.method(RE2JS, 'compile');
    const v = violation(huge);
    assert.equal(compile.mock.callCount(), 0, 'refused before it was compiled');
    assert.deepEqual(
      v.map((x) => x.field),
      ['guardrails[1].pattern'],
    );
    assert.match(v[0]!.description, /too large to check cheaply: it compiles to about \d+ RE2 instructions/);
    // Each alone fits; together they pass the budget of a config.
    const rules = Array.from({ length: 3 }, () => ({ type: 'block_pattern', pattern: 'a.{900}b' }));
    assert.deepEqual(
      guardrailViolations(rules).map((x) => x.field),
      ['guardrails[2].pattern'],
    ); // A budget spent to the last instruction leaves nothing for a further pattern, which is not waved through.
    const spent = [
      ...Array(2).fill({ type: 'block_pattern', pattern: 'a{998}' }),
      { type: 'block_pattern', pattern: '(?<=x)y' },
    ];
    assert.deepEqual(
      guardrailViolations(spent).map((x) => x.field),
      ['guardrails[2].pattern'],
    );
  });

  it('matches in time linear in the answer: ^(a+)+$ against 31 a and a ! answers at once', () => {
    const compiled = blockPatterns([
      { type: 'max_output_chars', value: 10 },
      { type: 'block_pattern', pattern: '^(a+)+$' },
    ]);
    assert.ok('patterns' in compiled);
    // RE2 runs an automaton, linear in the text for every pattern; a backtracking engine (JavaScript's
    // RegExp) needs minutes for the first answer below.
    assert.ok(
      compiled.patterns.every((p) => p.re instanceof RE2JS),
      'every pattern runs on RE2',
    );
    assert.equal(blockedBy(compiled.patterns, `${'a'.repeat(31)}!`), undefined);
    assert.equal(blockedBy(compiled.patterns, 'a'.repeat(10_000)), 1, 'the index of the rule that matched');
    assert.equal(blockedBy(compiled.patterns, `${'a'.repeat(100_000)}!`), undefined);
  });

  it('names a stored pattern RE2 refuses (written before RE2 checked them) instead of throwing', () => {
    const compiled = blockPatterns([
      { type: 'block_pattern', pattern: 'fine' },
      { type: 'block_pattern', pattern: '(?<=a)b' },
    ]);
    assert.ok('error' in compiled);
    assert.equal(compiled.index, 1);
    assert.match(compiled.error, /RE2/);
  });
});
