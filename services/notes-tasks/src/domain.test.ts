import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { codeRanges, findMentions, mentionTargets } from './domain/mentions.js';
import { place } from './domain/ordering.js';
import { PRIORITIES, priorityKey } from './domain/priority.js';
import { nextOccurrence, normalizeRrule, rruleProblem } from './domain/recurrence.js';
import { wordCount } from './domain/words.js';

const A = '0193a1b2-0000-7000-8000-00000000000a';
const B = '0193a1b2-0000-7000-8000-00000000000b';

describe('mentions', () => {
  it('finds [[type:uuid]] and [[type:uuid|label]], lowercasing ids and skipping unknown types', () => {
    const body = `See [[contact:${A.toUpperCase()}]] and [[deal:${B}|the Acme deal]]; not [[widget:${A}]] nor [[contact:not-a-uuid]] nor [contact:${A}].`;
    assert.deepEqual(
      findMentions(body).map((m) => [m.type, m.id, m.label]),
      [
        ['contact', A, undefined],
        ['deal', B, 'the Acme deal'],
      ],
    );
  });

  it('ignores mentions inside code spans and fenced code blocks', () => {
    const body = [
      `inline \`[[task:${A}]]\` and \`\`double [[task:${A}]] span\`\` but [[note:${B}]]`,
      '```js',
      `[[contact:${A}]]`,
      '```',
      '~~~~',
      `[[contact:${B}]]`,
      '~~~',
      'still code: the ~~~ above is shorter than the opening ~~~~',
      '~~~~',
      `after the fence [[member:${A}]]`,
    ].join('\n');
    assert.deepEqual(mentionTargets(body), [
      { type: 'note', id: B },
      { type: 'member', id: A },
    ]);
  });

  it('treats an unclosed backtick as text and an unclosed fence as code to the end', () => {
    assert.deepEqual(mentionTargets(`a lone \` then [[event:${A}]]`), [{ type: 'event', id: A }]);
    assert.deepEqual(mentionTargets(`\\\`escaped [[event:${A}]] \``), [{ type: 'event', id: A }]);
    assert.deepEqual(mentionTargets(`text\n\`\`\`\n[[event:${A}]]\nno closing fence`), []);
    // A code span does not run across a blank line.
    assert.deepEqual(mentionTargets(`\`open\n\n[[event:${A}]] \``), [{ type: 'event', id: A }]);
    assert.deepEqual(codeRanges('a `b` c'), [[2, 5]]);
  });

  it('lists each target once', () => {
    assert.deepEqual(mentionTargets(`[[task:${A}]] [[task:${A.toUpperCase()}|again]] [[contact:${A}]]`), [
      { type: 'task', id: A },
      { type: 'contact', id: A },
    ]);
  });
});

describe('word count', () => {
  it('counts words, not punctuation or markup; a mention counts as its label', () => {
    assert.equal(wordCount(''), 0);
    assert.equal(wordCount('  Hello, world!  '), 2);
    assert.equal(wordCount('# Title\n\n- one\n- two, three'), 4);
    assert.equal(wordCount(`Call [[contact:${A}|Dana Smith]] about [[deal:${B}]].`), 4);
    assert.equal(wordCount("it's 2026 — état-major"), 4);
    assert.ok(wordCount('我们明天开会') >= 2, 'CJK text is segmented into words');
  });
});

describe('ordering', () => {
  it('places a task before or after a sibling, or last', () => {
    assert.deepEqual(place(['a', 'b', 'c', 'd'], 'd', { before: 'a' }), ['d', 'a', 'b', 'c']);
    assert.deepEqual(place(['a', 'b', 'c', 'd'], 'a', { after: 'c' }), ['b', 'c', 'a', 'd']);
    assert.deepEqual(place(['a', 'b', 'c'], 'a', undefined), ['b', 'c', 'a']);
    assert.deepEqual(place(['a', 'b'], 'x', { after: 'b' }), ['a', 'b', 'x']);
    assert.equal(place(['a', 'b'], 'a', { before: 'zz' }), undefined);
    assert.equal(place(['a', 'b'], 'a', { before: 'a' }), undefined);
  });
});

describe('priority_key', () => {
  it('sorts most urgent first, then by position, in byte order', () => {
    const keys = [
      ['low', 1],
      ['urgent', 12],
      ['none', 2],
      ['urgent', 3],
      ['high', 100],
      ['medium', 1],
    ].map(([p, pos]) => ({ p, key: priorityKey(p as (typeof PRIORITIES)[number], pos as number) }));
    const sorted = [...keys].sort((x, y) => (Buffer.from(x.key) < Buffer.from(y.key) ? -1 : 1)).map((k) => k.key);
    assert.deepEqual(sorted, [
      '0-0000000003',
      '0-0000000012',
      '1-0000000100',
      '2-0000000001',
      '3-0000000001',
      '4-0000000002',
    ]);
  });
});

describe('recurrence', () => {
  it('accepts RRULE values and refuses what a task cannot carry', () => {
    assert.equal(normalizeRrule(' rrule:freq=weekly;byday=mo '), 'FREQ=WEEKLY;BYDAY=MO');
    assert.equal(rruleProblem('FREQ=WEEKLY;BYDAY=MO,WE', 'at'), undefined);
    assert.equal(rruleProblem('FREQ=MONTHLY;BYMONTHDAY=-1;COUNT=12', 'date'), undefined);
    for (const bad of [
      '',
      'FREQ=SECONDLY',
      'FREQ=MINUTELY',
      'INTERVAL=2',
      'FREQ=DAILY;FOO=1',
      'FREQ=DAILY;BYDAY=XX',
      'FREQ=DAILY;COUNT=2;UNTIL=20270101T000000Z',
      'FREQ=DAILY;INTERVAL=0',
      `DTSTART:20260101T000000Z\nRRULE:FREQ=DAILY`,
      'FREQ=DAILY;;',
      'FREQ=DAILY;FREQ=WEEKLY',
    ]) {
      assert.ok(rruleProblem(bad, 'at'), `${JSON.stringify(bad)} should be refused`);
    }
    assert.ok(rruleProblem('FREQ=HOURLY', 'date'), 'a date-only task cannot repeat hourly');
    assert.ok(rruleProblem('FREQ=DAILY;BYHOUR=9', 'date'));
  });

  it('gives the next occurrence strictly after the current one, ending with COUNT and UNTIL', () => {
    const anchor = new Date('2026-01-05T09:00:00Z');
    const next = (rule: string, at: string) => nextOccurrence(rule, anchor, { kind: 'at', at: new Date(at) });
    assert.deepEqual(next('FREQ=WEEKLY', '2026-01-05T09:00:00Z'), { kind: 'at', at: new Date('2026-01-12T09:00:00Z') });
    assert.deepEqual(next('FREQ=WEEKLY;BYDAY=MO,TH', '2026-01-05T09:00:00Z'), {
      kind: 'at',
      at: new Date('2026-01-08T09:00:00Z'),
    });
    assert.equal(next('FREQ=WEEKLY;COUNT=2', '2026-01-12T09:00:00Z'), undefined);
    assert.equal(next('FREQ=DAILY;UNTIL=20260107T090000Z', '2026-01-07T09:00:00Z'), undefined);
    const monthEnd = nextOccurrence('FREQ=MONTHLY;BYMONTHDAY=-1', new Date('2026-01-31T00:00:00Z'), {
      kind: 'date',
      date: '2026-01-31',
    });
    assert.deepEqual(monthEnd, { kind: 'date', date: '2026-02-28' });
  });
});
