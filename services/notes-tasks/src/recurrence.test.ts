import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { S, failure, startNotesTasks, tenant, type NotesTasks } from './test-support.js';

describe('recurring tasks over gRPC', () => {
  let nt: NotesTasks;
  before(async () => {
    nt = await startNotesTasks();
  });
  after(() => nt.stop());

  const at = (s: string) => new Date(s);

  it('advances due_at and next_occurrence on each completion, then completes when the series ends', async () => {
    const t = tenant();
    const task = await nt.client.call(
      S.createTask,
      { title: 'Weekly report', due_at: at('2026-01-05T09:00:00Z'), rrule: 'rrule:freq=weekly;count=3' },
      t.call,
    );
    assert.deepEqual(
      [task.rrule, task.due_at, task.next_occurrence],
      ['FREQ=WEEKLY;COUNT=3', at('2026-01-05T09:00:00Z'), at('2026-01-12T09:00:00Z')],
    );
    const first = await nt.client.call(S.completeTask, { id: task.id }, t.call);
    assert.deepEqual(
      [first.due_at, first.next_occurrence, first.completed_at],
      [at('2026-01-12T09:00:00Z'), at('2026-01-19T09:00:00Z'), undefined],
    );
    const second = await nt.client.call(S.completeTask, { id: task.id }, t.call);
    assert.deepEqual(
      [second.due_at, second.next_occurrence, second.completed_at],
      [at('2026-01-19T09:00:00Z'), undefined, undefined],
    );
    const last = await nt.client.call(S.completeTask, { id: task.id }, t.call);
    assert.ok(last.completed_at instanceof Date, 'the third occurrence was the last: the task completes');
    assert.deepEqual(last.due_at, at('2026-01-19T09:00:00Z'));
    const { rows } = await nt.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq`, [t.id]);
    assert.deepEqual(
      rows.map((r) => r.event_type),
      ['task.created', 'task.completed', 'task.completed', 'task.completed'],
    );
  });

  it('advances a date-only task by calendar dates', async () => {
    const t = tenant();
    const task = await nt.client.call(
      S.createTask,
      { title: 'Rent', due_date: '2026-01-31', rrule: 'FREQ=MONTHLY;BYMONTHDAY=-1' },
      t.call,
    );
    assert.deepEqual(task.next_occurrence, at('2026-02-28T00:00:00Z'));
    const next = await nt.client.call(S.completeTask, { id: task.id, occurrence: '2026-01-31' }, t.call);
    assert.deepEqual(
      [next.due_date, next.due_at, next.next_occurrence],
      ['2026-02-28', undefined, at('2026-03-31T00:00:00Z')],
    );
  });

  it('a completion of an occurrence already completed does not skip one; a future occurrence is a 409', async () => {
    const t = tenant();
    const task = await nt.client.call(
      S.createTask,
      { title: 'Standup', due_at: at('2026-02-02T08:30:00Z'), rrule: 'FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR' },
      t.call,
    );
    const occurrence = '2026-02-02T08:30:00.000000Z';
    const advanced = await nt.client.call(S.completeTask, { id: task.id, occurrence }, t.call);
    assert.deepEqual(advanced.due_at, at('2026-02-03T08:30:00Z'));
    // A retry of the same completion: unchanged, no event.
    const retried = await nt.client.call(
      S.completeTask,
      { id: task.id, occurrence: '2026-02-02T09:30:00+01:00' },
      t.call,
    );
    assert.deepEqual(retried, advanced);
    const err = await failure(
      nt.client.call(S.completeTask, { id: task.id, occurrence: '2026-02-05T08:30:00Z' }, t.call),
    );
    assert.deepEqual([err.code, err.reason], [grpc.status.FAILED_PRECONDITION, 'OCCURRENCE_NOT_CURRENT']);
    const wrongKind = await failure(nt.client.call(S.completeTask, { id: task.id, occurrence: '2026-02-03' }, t.call));
    assert.deepEqual(
      wrongKind.fieldViolations.map((v) => v.field),
      ['occurrence'],
    );
    assert.equal((await nt.events(t.id)).filter((e) => e === 'task.completed').length, 1);
  });

  it('20 parallel completions of the same occurrence advance it exactly once', async () => {
    const t = tenant();
    const task = await nt.client.call(
      S.createTask,
      { title: 'Water plants', due_at: at('2026-03-01T07:00:00Z'), rrule: 'FREQ=DAILY' },
      t.call,
    );
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        nt.client.call(S.completeTask, { id: task.id, occurrence: '2026-03-01T07:00:00Z' }, t.call),
      ),
    );
    for (const r of results) assert.deepEqual(r.due_at, at('2026-03-02T07:00:00Z'));
    const now = await nt.client.call(S.getTask, { id: task.id }, t.call);
    assert.deepEqual([now.due_at, now.next_occurrence], [at('2026-03-02T07:00:00Z'), at('2026-03-03T07:00:00Z')]);
    assert.equal((await nt.events(t.id)).filter((e) => e === 'task.completed').length, 1);
  });

  it('a new due or rule restarts the series; clearing the rule makes a plain task', async () => {
    const t = tenant();
    const task = await nt.client.call(
      S.createTask,
      { title: 'Review', due_at: at('2026-04-06T10:00:00Z'), rrule: 'FREQ=WEEKLY;COUNT=2' },
      t.call,
    );
    const moved = await nt.client.call(S.updateTask, { id: task.id, due_at: at('2026-04-08T10:00:00Z') }, t.call);
    assert.deepEqual(moved.next_occurrence, at('2026-04-15T10:00:00Z'));
    const monthly = await nt.client.call(S.updateTask, { id: task.id, rrule: 'FREQ=MONTHLY' }, t.call);
    assert.deepEqual(monthly.next_occurrence, at('2026-05-08T10:00:00Z'));
    const err = await failure(nt.client.call(S.updateTask, { id: task.id, update_mask: ['due_at'] }, t.call));
    assert.deepEqual(
      err.fieldViolations.map((v) => v.field),
      ['rrule'],
      'a recurring task keeps a due',
    );
    const plain = await nt.client.call(S.updateTask, { id: task.id, rrule: '' }, t.call);
    assert.deepEqual([plain.rrule, plain.next_occurrence], [undefined, undefined]);
    const done = await nt.client.call(S.completeTask, { id: task.id }, t.call);
    assert.ok(done.completed_at);
  });
});
