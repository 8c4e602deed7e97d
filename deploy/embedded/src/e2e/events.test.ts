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
import type { WorkautoClient } from '@workauto/client';
import { ok, startTestStack, type TenantFixture, type TestStack } from './harness.js';

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
  let api: WorkautoClient;
  const byId = (id: string) => ({ params: { path: { id } } });

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

  async function auditEntry(action: string, resourceId: string, ms = 15_000) {
    return eventually(
      `${action} of ${resourceId} is in the audit log`,
      async () =>
        (await ok(api.GET('/api/v1/audit-log', { params: { query: { action, limit: 100 } } }))).data.find(
          (e) => e.resource_id === resourceId,
        ),
      ms,
      100,
    );
  }

  async function newMember(): Promise<string> {
    const inv = await ok(
      api.POST('/api/v1/invitations', {
        body: { email: `m-${randomBytes(3).toString('hex')}@acme.test`, name: 'Mia', role: 'member' },
      }),
      201,
    );
    const claimed = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
    return claimed.member!.id;
  }

  /** A PATCH whose answer carries the resource's metadata. */
  type Change = {
    action: string;
    id: string;
    patch: () => Promise<{ data?: { metadata: unknown }; error?: unknown; response: Response }>;
  };
  /** PATCH of a member, a note and a contact with `metadata` (and another field each): one service each. */
  function changesWith(
    metadata: Record<string, unknown>,
    memberId: string,
    noteId: string,
    contactId: string,
  ): Change[] {
    return [
      {
        action: 'member.updated',
        id: memberId,
        patch: () => api.PATCH('/api/v1/members/{id}', { ...byId(memberId), body: { role: 'admin', metadata } }),
      },
      {
        action: 'note.updated',
        id: noteId,
        patch: () => api.PATCH('/api/v1/notes/{id}', { ...byId(noteId), body: { title: 'Deeper', metadata } }),
      },
      {
        action: 'contact.updated',
        id: contactId,
        patch: () => api.PATCH('/api/v1/contacts/{id}', { ...byId(contactId), body: { company: 'Globex', metadata } }),
      },
    ];
  }

  before(async () => {
    stack = await startTestStack({ gatewayOptions: { rateLimitPerMinute: 100_000 } });
    acme = await stack.createTenant('Acme');
    api = stack.client(acme.key);
  });
  after(() => stack?.stop());

  it('audits a mutation of every service whose metadata is as deep as the API accepts', async () => {
    const memberId = await newMember();
    const note = await ok(api.POST('/api/v1/notes', { body: { title: 'Deep' } }), 201);
    const contact = await ok(api.POST('/api/v1/contacts', { body: { name: 'Dana' } }), 201);
    const changes = changesWith(DEEPEST_METADATA, memberId, note.id, contact.id);
    for (const change of changes) {
      const changed = await ok(change.patch());
      assert.deepEqual(changed.metadata, DEEPEST_METADATA, change.action);
    }
    for (const change of changes) {
      const entry = await auditEntry(change.action, change.id);
      assert.deepEqual(
        entry.metadata?.metadata,
        DEEPEST_METADATA,
        `${change.action}: the audit entry holds the change`,
      );
    }
    assert.equal((await auditEntry('member.updated', memberId)).metadata?.role, 'admin');
  });

  it('never answers 200 to a change it then leaves out of the audit log, however deep its metadata', async () => {
    // One level past the limit of docs/api.md §4: the gateway answers 400 once it enforces the limit;
    // until then the change is accepted and must be audited (it used to be dead-lettered: the old
    // Event's Struct metadata hit the protobuf decoder's recursion limit at this depth).
    const tooDeep = nested(33);
    const memberId = await newMember();
    const note = await ok(api.POST('/api/v1/notes', { body: { title: 'Too deep' } }), 201);
    const contact = await ok(api.POST('/api/v1/contacts', { body: { name: 'Deep Dana' } }), 201);
    for (const change of changesWith(tooDeep, memberId, note.id, contact.id)) {
      const { response, data, error } = await change.patch();
      assert.ok(
        response.status === 400 || response.status === 200,
        `${change.action}: ${response.status} ${JSON.stringify(error ?? data)}`,
      );
      if (response.status === 200)
        assert.deepEqual(
          (await auditEntry(change.action, change.id)).metadata?.metadata,
          tooDeep,
          `${change.action} was accepted, so it is audited`,
        );
    }
  });

  it("carries in each event's data the resource exactly as GET returns it", async () => {
    const memberId = await newMember();
    await ok(
      api.PATCH('/api/v1/members/{id}', {
        ...byId(memberId),
        body: { name: 'Mia Renamed', metadata: { team: 'blue' } },
      }),
    );
    const note = await ok(
      api.POST('/api/v1/notes', { body: { title: 'Plan', body: 'see [[later]]', metadata: { n: 1 } } }),
      201,
    );
    await ok(api.PATCH('/api/v1/notes/{id}', { ...byId(note.id), body: { is_pinned: true } }));
    const task = await ok(
      api.POST('/api/v1/tasks', {
        body: { title: 'Ship', due_at: '2026-12-01T09:30:00.123456Z', priority: 'high', rrule: 'FREQ=WEEKLY' },
      }),
      201,
    );
    const pipeline = await ok(
      api.POST('/api/v1/pipelines', {
        body: {
          name: 'Sales',
          stages: [
            { name: 'Lead', stage_type: 'open', default_confidence: 0.25 },
            { name: 'Won', stage_type: 'won' },
          ],
        },
      }),
      201,
    );
    const deal = await ok(
      api.POST('/api/v1/deals', {
        body: { title: 'Big', amount: 1234.5, stage_id: pipeline.stages[0]!.id, expected_close_date: '2026-12-31' },
      }),
      201,
    );
    const contact = await ok(api.POST('/api/v1/contacts', { body: { name: 'Erin' } }), 201);
    await ok(api.PATCH('/api/v1/contacts/{id}', { ...byId(contact.id), body: { job_title: 'CFO' } }));
    const ofContact = { params: { path: { contact_id: contact.id } } };
    const channel = await ok(
      api.POST('/api/v1/contacts/{contact_id}/channels', {
        ...ofContact,
        body: { type: 'email', value: 'Erin@Example.com', is_primary: true },
      }),
      201,
    );
    // [service, resource id, event type, GET of the resource]
    const resources: [string, string, string, () => Promise<{ data?: unknown; response: Response }>][] = [
      ['identity', memberId, 'member.updated', () => api.GET('/api/v1/members/{id}', byId(memberId))],
      ['notes_tasks', note.id, 'note.updated', () => api.GET('/api/v1/notes/{id}', byId(note.id))],
      ['notes_tasks', task.id, 'task.created', () => api.GET('/api/v1/tasks/{id}', byId(task.id))],
      ['crm_pipelines', pipeline.id, 'pipeline.created', () => api.GET('/api/v1/pipelines/{id}', byId(pipeline.id))],
      ['crm_pipelines', deal.id, 'deal.created', () => api.GET('/api/v1/deals/{id}', byId(deal.id))],
      ['crm_pipelines', contact.id, 'contact.updated', () => api.GET('/api/v1/contacts/{id}', byId(contact.id))],
    ];
    for (const [service, id, type, get] of resources) {
      const event = await lastEvent(service, id);
      const got = await ok(get());
      assert.equal(event.type, type);
      assert.equal(event.data_schema, 'v1');
      assert.deepEqual(event.data, got, `${type}: event data is the GET body`);
    }
    const channelEvent = await lastEvent('crm_pipelines', channel.id);
    const channels = await ok(api.GET('/api/v1/contacts/{contact_id}/channels', ofContact)); // response_body: the list itself
    assert.deepEqual(
      channelEvent.data,
      channels.find((c) => c.id === channel.id),
    );
  });

  it('puts each event on its channels: the resource type, and its parent where it has one', async () => {
    const pipeline = await ok(
      api.POST('/api/v1/pipelines', { body: { name: 'Channels', stages: [{ name: 'Lead', stage_type: 'open' }] } }),
      201,
    );
    const stage = await ok(
      api.POST('/api/v1/pipelines/{pipeline_id}/stages', {
        params: { path: { pipeline_id: pipeline.id } },
        body: { name: 'Won', stage_type: 'won' },
      }),
      201,
    );
    const deal = await ok(
      api.POST('/api/v1/deals', { body: { title: 'D', amount: 1, stage_id: pipeline.stages[0]!.id } }),
      201,
    );
    const contact = await ok(api.POST('/api/v1/contacts', { body: { name: 'Cy' } }), 201);
    const channel = await ok(
      api.POST('/api/v1/contacts/{contact_id}/channels', {
        params: { path: { contact_id: contact.id } },
        body: { type: 'email', value: 'cy@example.com' },
      }),
      201,
    );
    const task = await ok(api.POST('/api/v1/tasks', { body: { title: 'Parent' } }), 201);
    const subtask = await ok(api.POST('/api/v1/tasks', { body: { title: 'Child', parent_id: task.id } }), 201);
    const expected: [string, string, string[]][] = [
      ['crm_pipelines', pipeline.id, ['pipeline']],
      ['crm_pipelines', stage.id, ['pipeline_stage', `pipeline:${pipeline.id}`]],
      ['crm_pipelines', deal.id, ['deal', `pipeline:${pipeline.id}`]],
      ['crm_pipelines', contact.id, ['contact']],
      ['crm_pipelines', channel.id, ['contact_channel', `contact:${contact.id}`]],
      ['notes_tasks', task.id, ['task']],
      ['notes_tasks', subtask.id, ['task', `task:${task.id}`]],
    ];
    const calendar = await ok(api.POST('/api/v1/calendars', { body: { name: 'Team' } }), 201);
    const meeting = await ok(
      api.POST('/api/v1/events', {
        body: {
          calendar_id: calendar.id,
          title: 'Sync',
          start_at: '2026-12-01T09:00:00Z',
          end_at: '2026-12-01T09:30:00Z',
        },
      }),
      201,
    );
    expected.push(
      ['calendar', calendar.id, ['calendar']],
      ['calendar', meeting.id, ['calendar_event', `calendar:${calendar.id}`]],
    );
    for (const [service, id, channels] of expected)
      assert.deepEqual((await lastEvent(service, id)).channels, channels, `${id}`);
  });
});
