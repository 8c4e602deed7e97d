import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RecurrenceLimitError, nextOccurrence, rruleProblem } from './recurrence.js';

describe('rrule evaluation limits', () => {
  const leapMonday = 'FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO';
  const anchor = new Date('2044-02-29T09:00:00Z');

  it('refuses a rule whose next occurrence lies beyond the limits, with what to do instead', () => {
    const problem = rruleProblem(leapMonday, 'at', anchor);
    assert.ok(problem);
    assert.match(problem, /coarser FREQ/);
    assert.throws(() => nextOccurrence(leapMonday, anchor, { kind: 'at', at: anchor }), RecurrenceLimitError);
    // The same dates at a coarser frequency are found.
    assert.equal(rruleProblem('FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO', 'at', anchor), undefined);
  });

  it('bounds the CPU time of rules that never match', () => {
    const never = [
      'FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30',
      'FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30',
      'FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO;BYMONTH=2',
      'FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30',
    ];
    for (const rule of never) {
      // CPU time, not wall time: a loaded machine (CI, parallel test files) stretches the latter.
      // The library's own limits let each of these run far longer (docs/notes-tasks.md, Recurrence).
      const started = process.cpuUsage();
      assert.ok(rruleProblem(rule, 'at', new Date('2026-03-05T09:00:00Z')), rule);
      const { user, system } = process.cpuUsage(started);
      const ms = (user + system) / 1000;
      assert.ok(ms < 150, `${rule} took ${Math.round(ms)} ms of CPU`);
    }
  });
});
