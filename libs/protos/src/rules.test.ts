import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import './gen/workauto/calendar/v1/calendar.js';
import './gen/workauto/notes_tasks/v1/notes_tasks.js';
import { loadSchema, messageDesc, messageType } from './schema.js';
import { hasRules, loadRules, ruleViolations } from './rules.js';

/** The field violations of a ts-proto request object of `typeName`, as field → text. */
function violations(typeName: string, request: Record<string, unknown>): Record<string, string> {
  const desc = messageDesc(typeName);
  return Object.fromEntries(
    ruleViolations(desc, messageType(desc).encode(request)).map((v) => [v.field, v.description]),
  );
}
const TASK = 'workauto.notes_tasks.v1.CreateTaskRequest';
const EVENT = 'workauto.calendar.v1.CreateEventRequest';
const UPDATE_TASK = 'workauto.notes_tasks.v1.UpdateTaskRequest';
const ID = '0193a000-0000-7000-8000-000000000000';

describe('field rules (buf.validate annotations)', () => {
  before(() => loadRules());

  it('compile for every request of the API: a rule the validator cannot read fails here, not on a request', () => {
    let checked = 0;
    for (const file of loadSchema().files.filter((f) => f.name.startsWith('workauto/'))) {
      for (const service of file.services)
        for (const method of service.methods) {
          assert.doesNotThrow(() => ruleViolations(method.input, new Uint8Array()), method.input.typeName);
          checked++;
        }
    }
    assert.ok(checked > 100, `${checked} requests`);
  });

  it('name every invalid field once, with its first broken rule and a text that says what to send', () => {
    assert.deepEqual(
      violations(TASK, {
        title: `  ${'x'.repeat(501)}  `,
        priority: 42,
        parent_id: 'nope',
        estimation_minutes: -1,
        external_id: '   ',
        due_date: '2026-02-30',
      }),
      {
        title: 'must be at most 500 characters (after trimming)',
        parent_id: 'must be a UUID, got "nope"',
        priority: 'must be one of none, low, medium, high, urgent',
        due_date: '2026-02-30 is not a calendar date',
        estimation_minutes: 'must be from 0 to 1000000',
        external_id: 'must not be empty or only whitespace',
      },
    );
    // Whitespace around a trimmed field does not count; "" leaves an optional id out.
    assert.deepEqual(violations(TASK, { title: `  ${'x'.repeat(500)}  `, assignee_id: '', parent_id: ID }), {});
  });

  it('read dates as calendar dates (leap years too) and keep event and task times in the years 1900 to 2999', () => {
    assert.deepEqual(
      violations(TASK, { title: 't', due_date: '2024-02-29', deadline: '2000-02-29', start_date: '1900-01-01' }),
      {},
    );
    assert.deepEqual(
      violations(TASK, {
        title: 't',
        due_date: '1900-02-29',
        deadline: '26-01-01',
        start_date: '1899-12-31',
        due_at: new Date('3000-01-01T00:00:00Z'),
      }),
      {
        due_date: '1900-02-29 is not a calendar date',
        deadline: 'must be a date like 2026-12-31 (YYYY-MM-DD)',
        start_date: 'must be in the years 1900 to 2999',
        due_at: 'must be in the years 1900 to 2999',
      },
    );
    assert.deepEqual(
      violations(EVENT, {
        calendar_id: ID,
        title: 'e',
        exdates: [new Date('2026-01-01T00:00:00Z'), new Date('1899-12-31T23:59:59Z')],
      }),
      { 'exdates[1]': 'must be in the years 1900 to 2999' },
    );
    // An update clears a date with "".
    assert.deepEqual(violations(UPDATE_TASK, { id: ID, due_date: '' }), {});
  });

  it('refuse a URL with whitespace or control characters anywhere, which URL parsing would drop silently', () => {
    for (const url of [
      'https://meet.example.com/a\r\nX-Injected: 1',
      'https://meet.example.com/a\tb',
      ' https://meet.example.com/',
      'https://meet.example.com/a b',
      'https://meet.example.com/\u0000',
      'https://meet.example.com/\u2028',
    ]) {
      assert.deepEqual(
        violations(EVENT, { calendar_id: ID, title: 'e', conference_url: url }),
        { conference_url: 'must not contain whitespace or control characters; percent-encode them (a space is %20)' },
        JSON.stringify(url),
      );
    }
    const url = (conference_url: string) =>
      Object.keys(violations(EVENT, { calendar_id: ID, title: 'e', conference_url }));
    assert.deepEqual(url('https://meet.example.com/room?x=%20y'), []);
    assert.deepEqual(url(''), []);
    assert.deepEqual(url('javascript:alert(1)'), ['conference_url']);
    assert.deepEqual(url(`https://e.com/${'a'.repeat(2_100)}`), ['conference_url']);
  });

  it('bound free-form metadata to 16 KiB of JSON, and say a page size of 0 is too small', () => {
    assert.deepEqual(violations(TASK, { title: 't', metadata: { blob: 'x'.repeat(16_384) } }), {
      metadata: 'must be at most 16384 bytes of JSON',
    });
    assert.deepEqual(violations('workauto.notes_tasks.v1.ListTasksRequest', { limit: 0 }), {
      limit: 'must be at least 1 (a value above 200 is taken as 200)',
    });
    assert.deepEqual(violations('workauto.notes_tasks.v1.ListTasksRequest', { limit: 500 }), {});
  });

  it('skip the bytes of a request without rules', () => {
    assert.equal(hasRules(messageDesc('workauto.notes_tasks.v1.ListSubtasksResponse')), false);
    assert.equal(hasRules(messageDesc(TASK)), true);
  });
});
