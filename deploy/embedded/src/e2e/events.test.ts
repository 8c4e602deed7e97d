/**
 * Events as their consumers see them, end to end through the gateway: a mutation's event carries
 * the resource exactly as the REST API returns it, and client data as deep as the API accepts
 * never keeps an event from the audit log (deep metadata used to make identity's consumer
 * dead-letter it: a change nobody could see in GET /audit-log).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { decodeEvent, type ConsumedEvent } from '@workauto/events';
import { eventually } from '@workauto/testing';
import { startTestStack, type TenantFixture, type TestStack } from './harness.js';

/** JSON nested `depth` levels of containers: {"a":1} is 1, {"a":{"b":1}} is 2. */
function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { leaf: 'bottom' };
  for (let i = 1; i < depth; i++) value = { [`level_${depth - i}`]: value };
  return value;
}

/** The deepest body the gateway accepts (docs/api.md §4: 32 levels) is {"metadata": <31 levels>, …}. */
const DEEPEST_METADATA = nested(31);

describe('events through the gateway', () => {
  let stack: TestStack;
  let acme: TenantFixture;
  const call = (method: string, path: string, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { key: acme.key, ...(body === undefined ? {} : { body }) });

  /** The latest event recorded for a resource, read from its service's outbox (checking, never setting up). */
  async function lastEvent(service: string, resourceId: string): Promise<ConsumedEvent> {
    const db = new pg.Client({ connectionString: stack.databaseUrl(service) });
    await db.connect();
    try {
      const { rows } = await db.query<{ payload: Buffer }>(
        'SELECT payload FROM outbox WHERE resource_id = $1 ORDER BY seq DESC LIMIT 1',
        [resourceId],
      );
      assert.ok(rows[0], `${service} recorded an event for ${resourceId}`);
      return decodeEvent(rows[0].payload);
    } finally {
      await db.end();
    }
  }

  type AuditEntry = { resource_id: string; metadata: Record<string, unknown> };
  async function auditEntry(
    action: string,
    resourceId: string,
    ms = 15_000,
  ): Promise<{ metadata: Record<string, unknown> }> {
    return eventually(
      `${action} of ${resourceId} is in the audit log`,
      async () =>
        ((await call('GET', `/audit-log?action=${action}&limit=100`)).body.data as AuditEntry[]).find(
          (e) => e.resource_id === resourceId,
        ),
      ms,
      100,
    );
  }

  async function newMember(): Promise<string> {
    const inv = await call('POST', '/invitations', {
      email: `m-${randomBytes(3).toString('hex')}@acme.test`,
      name: 'Mia',
      role: 'member',
    });
    assert.equal(inv.status, 201, JSON.stringify(inv.body));
    const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
    assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
    return claimed.body.member.id as string;
  }

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 100_000 } });
    acme = await stack.createTenant('Acme');
  });
  after(() => stack?.stop());

  it('audits a mutation of every service whose metadata is as deep as the API accepts', async () => {
    const memberId = await newMember();
    const note = await call('POST', '/notes', { title: 'Deep' });
    const contact = await call('POST', '/contacts', { name: 'Dana' });
    const changes = [
      {
        action: 'member.updated',
        path: `/members/${memberId}`,
        body: { role: 'admin', metadata: DEEPEST_METADATA },
        id: memberId,
      },
      {
        action: 'note.updated',
        path: `/notes/${note.body.id}`,
        body: { title: 'Deeper', metadata: DEEPEST_METADATA },
        id: note.body.id as string,
      },
      {
        action: 'contact.updated',
        path: `/contacts/${contact.body.id}`,
        body: { company: 'Globex', metadata: DEEPEST_METADATA },
        id: contact.body.id as string,
      },
    ];
    for (const change of changes) {
      const res = await call('PATCH', change.path, change.body);
      assert.equal(res.status, 200, `${change.path}: ${JSON.stringify(res.body)}`);
      assert.deepEqual(res.body.metadata, DEEPEST_METADATA);
    }
    for (const change of changes) {
      const entry = await auditEntry(change.action, change.id);
      assert.deepEqual(entry.metadata.metadata, DEEPEST_METADATA, `${change.action}: the audit entry holds the change`);
    }
    assert.equal((await auditEntry('member.updated', memberId)).metadata.role, 'admin');
  });

  it('never answers 200 to a change it then leaves out of the audit log, however deep its metadata', async () => {
    // One level past the limit of docs/api.md §4: the gateway answers 400 once it enforces the limit;
    // until then the change is accepted and must be audited (it used to be dead-lettered: the old
    // Event's Struct metadata hit the protobuf decoder's recursion limit at this depth).
    const tooDeep = nested(33);
    const memberId = await newMember();
    const note = await call('POST', '/notes', { title: 'Too deep' });
    const contact = await call('POST', '/contacts', { name: 'Deep Dana' });
    const changes = [
      {
        action: 'member.updated',
        path: `/members/${memberId}`,
        body: { role: 'admin', metadata: tooDeep },
        id: memberId,
      },
      {
        action: 'note.updated',
        path: `/notes/${note.body.id}`,
        body: { metadata: tooDeep },
        id: note.body.id as string,
      },
      {
        action: 'contact.updated',
        path: `/contacts/${contact.body.id}`,
        body: { metadata: tooDeep },
        id: contact.body.id as string,
      },
    ];
    for (const change of changes) {
      const res = await call('PATCH', change.path, change.body);
      assert.ok(res.status === 400 || res.status === 200, `${change.path}: ${res.status} ${JSON.stringify(res.body)}`);
      if (res.status === 200)
        assert.deepEqual(
          (await auditEntry(change.action, change.id)).metadata.metadata,
          tooDeep,
          `${change.action} was accepted, so it is audited`,
        );
    }
  });

  it("carries in each event's data the resource exactly as GET returns it", async () => {
    const memberId = await newMember();
    assert.equal(
      (await call('PATCH', `/members/${memberId}`, { name: 'Mia Renamed', metadata: { team: 'blue' } })).status,
      200,
    );
    const note = (await call('POST', '/notes', { title: 'Plan', body: 'see [[later]]', metadata: { n: 1 } })).body;
    assert.equal((await call('PATCH', `/notes/${note.id}`, { is_pinned: true })).status, 200);
    const task = (
      await call('POST', '/tasks', {
        title: 'Ship',
        due_at: '2026-12-01T09:30:00.123456Z',
        priority: 'high',
        rrule: 'FREQ=WEEKLY',
      })
    ).body;
    const pipeline = (
      await call('POST', '/pipelines', {
        name: 'Sales',
        stages: [
          { name: 'Lead', stage_type: 'open', default_confidence: 0.25 },
          { name: 'Won', stage_type: 'won' },
        ],
      })
    ).body;
    const deal = (
      await call('POST', '/deals', {
        title: 'Big',
        amount: 1234.5,
        stage_id: pipeline.stages[0].id,
        expected_close_date: '2026-12-31',
      })
    ).body;
    const contact = (await call('POST', '/contacts', { name: 'Erin' })).body;
    assert.equal((await call('PATCH', `/contacts/${contact.id}`, { job_title: 'CFO' })).status, 200);
    const channel = (
      await call('POST', `/contacts/${contact.id}/channels`, {
        type: 'email',
        value: 'Erin@Example.com',
        is_primary: true,
      })
    ).body;
    const resources = [
      { service: 'identity', id: memberId, get: `/members/${memberId}`, type: 'member.updated' },
      { service: 'notes_tasks', id: note.id, get: `/notes/${note.id}`, type: 'note.updated' },
      { service: 'notes_tasks', id: task.id, get: `/tasks/${task.id}`, type: 'task.created' },
      { service: 'crm_pipelines', id: pipeline.id, get: `/pipelines/${pipeline.id}`, type: 'pipeline.created' },
      { service: 'crm_pipelines', id: deal.id, get: `/deals/${deal.id}`, type: 'deal.created' },
      { service: 'crm_pipelines', id: contact.id, get: `/contacts/${contact.id}`, type: 'contact.updated' },
    ];
    for (const r of resources) {
      const event = await lastEvent(r.service, r.id);
      const got = await call('GET', r.get);
      assert.equal(got.status, 200, JSON.stringify(got.body));
      assert.equal(event.type, r.type);
      assert.equal(event.data_schema, 'v1');
      assert.deepEqual(event.data, got.body, `${r.type}: event data is the GET body`);
    }
    const channelEvent = await lastEvent('crm_pipelines', channel.id);
    const channels = (await call('GET', `/contacts/${contact.id}/channels`)).body as { id: string }[]; // response_body: the list itself
    assert.deepEqual(
      channelEvent.data,
      channels.find((c) => c.id === channel.id),
    );
  });

  it('puts each event on its channels: the resource type, and its parent where it has one', async () => {
    const pipeline = (
      await call('POST', '/pipelines', { name: 'Channels', stages: [{ name: 'Lead', stage_type: 'open' }] })
    ).body;
    const stage = (await call('POST', `/pipelines/${pipeline.id}/stages`, { name: 'Won', stage_type: 'won' })).body;
    const deal = (await call('POST', '/deals', { title: 'D', amount: 1, stage_id: pipeline.stages[0].id })).body;
    const contact = (await call('POST', '/contacts', { name: 'Cy' })).body;
    const channel = (await call('POST', `/contacts/${contact.id}/channels`, { type: 'email', value: 'cy@example.com' }))
      .body;
    const task = (await call('POST', '/tasks', { title: 'Parent' })).body;
    const subtask = (await call('POST', '/tasks', { title: 'Child', parent_id: task.id })).body;
    const expected: [string, string, string[]][] = [
      ['crm_pipelines', pipeline.id, ['pipeline']],
      ['crm_pipelines', stage.id, ['pipeline_stage', `pipeline:${pipeline.id}`]],
      ['crm_pipelines', deal.id, ['deal', `pipeline:${pipeline.id}`]],
      ['crm_pipelines', contact.id, ['contact']],
      ['crm_pipelines', channel.id, ['contact_channel', `contact:${contact.id}`]],
      ['notes_tasks', task.id, ['task']],
      ['notes_tasks', subtask.id, ['task', `task:${task.id}`]],
    ];
    const calendar = (await call('POST', '/calendars', { name: 'Team' })).body;
    const meeting = (
      await call('POST', '/events', {
        calendar_id: calendar.id,
        title: 'Sync',
        start_at: '2026-12-01T09:00:00Z',
        end_at: '2026-12-01T09:30:00Z',
      })
    ).body;
    assert.ok(meeting.id, JSON.stringify(meeting));
    expected.push(
      ['calendar', calendar.id, ['calendar']],
      ['calendar', meeting.id, ['calendar_event', `calendar:${calendar.id}`]],
    );
    for (const [service, id, channels] of expected)
      assert.deepEqual((await lastEvent(service, id)).channels, channels, `${id}`);
  });
});
