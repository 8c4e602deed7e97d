import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '@workauto/config';
import { EVENT_TYPES } from '@workauto/events';
import { settingsFromEnv, webhookEnv } from './settings.js';
import { channelRefusal, eventTypeRefusal, matches } from './domain/filters.js';
import { nextDelay, parseSchedule, retryAfterMs } from './domain/schedule.js';
import { signatureHeader } from './domain/signing.js';
import { allows, DOMAINS, type AccessLevels } from '@workauto/grpc';
import { reducedUrl } from '@workauto/egress';
import {
  EVENT_DOMAINS,
  readableResourceTypes,
  reducePayloadUrls,
  resourceTypeOf,
  urlView,
} from './domain/visibility.js';
import { expectedSignature } from './testing/receiver.js';

describe('signing', () => {
  it('matches the Standard Webhooks test vector, and the receiver check agrees', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
    const body = '{"test": 2432232314}';
    assert.equal(
      signatureHeader([secret], id, new Date(1614265330_000), body),
      'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    );
    assert.equal(expectedSignature(secret, id, '1614265330', body), 'g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('signs with every secret given, space-separated, in order', () => {
    const a = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const b = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const header = signatureHeader([b, a], 'id', new Date(1_000_000), '{}');
    assert.deepEqual(
      header.split(' ').map((s) => s.slice(3)),
      [expectedSignature(b, 'id', '1000', '{}'), expectedSignature(a, 'id', '1000', '{}')],
    );
  });
});

describe('schedule', () => {
  it('reads WEBHOOK_RETRY_SCHEDULE and refuses what is not a list of durations', () => {
    assert.deepEqual(parseSchedule('0s,1s,2s'), [0, 1000, 2000]);
    assert.deepEqual(parseSchedule('0s,5s,5m,30m,2h,5h,10h,10h')?.length, 8);
    assert.equal(parseSchedule('0s,soon'), undefined);
  });

  it('jitters ±20 %, ends after the last attempt, and waits at least a Retry-After', () => {
    const s = [0, 5_000, 300_000];
    assert.equal(
      nextDelay(s, 1, undefined, () => 0),
      4_000,
    );
    assert.equal(
      nextDelay(s, 1, undefined, () => 1),
      6_000,
    );
    assert.equal(nextDelay(s, 3), undefined);
    assert.equal(
      nextDelay(s, 1, 60_000, () => 0.5),
      60_000,
    );
  });

  it('reads Retry-After as seconds or a date, capped at an hour', () => {
    assert.equal(retryAfterMs('2'), 2_000);
    assert.equal(retryAfterMs('86400'), 3_600_000);
    const now = Date.UTC(2030, 0, 1, 12, 0, 0);
    assert.equal(retryAfterMs('Tue, 01 Jan 2030 12:00:10 GMT', now), 10_000);
    assert.equal(retryAfterMs('Tue, 01 Jan 2030 11:59:00 GMT', now), 0, 'a date past is now');
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(null), undefined);
  });
});

describe('filters', () => {
  const deal = { type: 'deal.updated', channels: ['deal', 'pipeline:p1'] };
  it('matches names, <resource>.* wildcards and channels; both filters must match', () => {
    assert.equal(matches({ event_types: [], channels: [] }, deal), true);
    assert.equal(matches({ event_types: ['deal.created'], channels: [] }, deal), false);
    assert.equal(matches({ event_types: ['deal.*'], channels: [] }, deal), true);
    assert.equal(matches({ event_types: ['deal_x.*'], channels: [] }, deal), false);
    assert.equal(matches({ event_types: [], channels: ['pipeline:p1'] }, deal), true);
    assert.equal(matches({ event_types: [], channels: ['pipeline:p2'] }, deal), false);
    assert.equal(matches({ event_types: ['deal.updated'], channels: ['pipeline:p2'] }, deal), false);
    assert.equal(matches({ event_types: ['note.*'], channels: ['pipeline:p1'] }, deal), false);
  });

  it('accepts catalogue names and wildcards of catalogued resources only', () => {
    assert.equal(eventTypeRefusal('note.created', EVENT_TYPES), null);
    assert.equal(eventTypeRefusal('note.*', EVENT_TYPES), null);
    assert.match(eventTypeRefusal('note.exploded', EVENT_TYPES)!, /GET \/webhook-event-types/);
    assert.match(eventTypeRefusal('spaceship.*', EVENT_TYPES)!, /no resource type/);
    assert.equal(channelRefusal('pipeline:0193a000-0000-7000-8000-000000000001'), null);
    assert.notEqual(channelRefusal('Pipeline: x'), null);
  });
});

describe('settings', () => {
  it('reads the WEBHOOK_* variables, with the defaults of docs/webhooks.md, and names a bad one', () => {
    const defaults = settingsFromEnv(loadConfig(webhookEnv, {}));
    assert.deepEqual(
      defaults.retrySchedule,
      [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    );
    assert.equal(defaults.timeoutMs, 15_000);
    assert.equal(defaults.secretGraceMs, 86_400_000);
    assert.equal(defaults.disableAfterMs, 5 * 86_400_000);
    assert.equal(defaults.endpointConcurrency, 4);
    assert.equal(defaults.tenantConcurrency, 32);
    assert.equal(defaults.retentionDays, 30);
    assert.equal(defaults.maxEndpoints, 100);
    const short = settingsFromEnv(
      loadConfig(webhookEnv, { WEBHOOK_RETRY_SCHEDULE: '0s,1s,2s', WEBHOOK_SECRET_GRACE: '1s' }),
    );
    assert.deepEqual(short.retrySchedule, [0, 1_000, 2_000]);
    assert.equal(short.secretGraceMs, 1_000);
    assert.throws(
      () => loadConfig(webhookEnv, { WEBHOOK_RETRY_SCHEDULE: '0s,later' }),
      /WEBHOOK_RETRY_SCHEDULE: expected 1 to 20/,
    );
    assert.equal(settingsFromEnv(loadConfig(webhookEnv, { WEBHOOK_MAX_ENDPOINTS: '5' })).maxEndpoints, 5);
    for (const bad of ['0', '-1', '2.5', 'many', '10001']) {
      assert.throws(
        () => loadConfig(webhookEnv, { WEBHOOK_MAX_ENDPOINTS: bad }),
        /WEBHOOK_MAX_ENDPOINTS: expected a whole number from 1 to 10000/,
        bad,
      );
    }
  });
});

describe('event visibility', () => {
  const levels = (access: AccessLevels | undefined) => ({
    allows: (domain: (typeof DOMAINS)[number], need: 'none' | 'read' | 'write' | 'admin') =>
      allows(access, domain, need),
  });

  it('gives every resource type of the event catalogue a domain, and names no other', () => {
    const catalogued = [...new Set(EVENT_TYPES.map((t) => resourceTypeOf(t.name)))].sort();
    assert.deepEqual(Object.keys(EVENT_DOMAINS).sort(), catalogued);
    for (const domain of Object.values(EVENT_DOMAINS)) assert.ok(DOMAINS.includes(domain), domain);
  });

  it('reads a caller’s levels: the resource types it may read, or no filter when it may read them all', () => {
    assert.equal(readableResourceTypes(levels(undefined)), undefined);
    const everywhere = Object.fromEntries(DOMAINS.map((d) => [d, 'read'])) as AccessLevels;
    assert.equal(readableResourceTypes(levels(everywhere)), undefined);
    const types = readableResourceTypes(levels({ ...everywhere, notes: 'none', integrations: 'none' }))!;
    assert.deepEqual(
      Object.keys(EVENT_DOMAINS).filter((t) => !types.includes(t)),
      ['integration_key', 'note', 'tag'],
    );
    assert.deepEqual(readableResourceTypes(levels({ crm: 'write' })), [
      'pipeline',
      'pipeline_stage',
      'deal',
      'contact',
      'contact_channel',
    ]);
  });

  it('reduces endpoint and MCP server URLs in payloads below admin, in retried events at any depth', () => {
    const endpoint = { type: 'webhook_endpoint.created', data: { id: 'e', url: 'https://h.example.com:8443/t?k=1' } };
    const app = { type: 'app.updated', data: { id: 'a', mcp_server_url: 'https://m.example.com/sk_live' } };
    const retried = (payload: object) => ({ type: 'webhook_event.retried', data: { id: 'r', payload } });
    const reader = urlView(levels({ webhooks: 'read', apps: 'read' }));
    assert.deepEqual(reducePayloadUrls(endpoint, reader, reducedUrl).data, {
      id: 'e',
      url: 'https://h.example.com:8443/…',
    });
    assert.deepEqual(
      reducePayloadUrls(retried(retried(app)), reader, reducedUrl),
      retried(retried({ ...app, data: { id: 'a', mcp_server_url: 'https://m.example.com/…' } })),
    );
    const admin = urlView(levels({ webhooks: 'admin', apps: 'admin' }));
    assert.deepEqual(reducePayloadUrls(retried(endpoint), admin, reducedUrl), retried(endpoint));
    const hooksAdmin = urlView(levels({ webhooks: 'admin', apps: 'read' }));
    assert.deepEqual(reducePayloadUrls(endpoint, hooksAdmin, reducedUrl), endpoint);
    assert.equal(
      (reducePayloadUrls(app, hooksAdmin, reducedUrl).data as { mcp_server_url?: string }).mcp_server_url,
      'https://m.example.com/…',
    );
    assert.equal(reducedUrl('not a url'), '…');
  });

  it("reduces an agent config's provider base_url below admin on agents, as the agents API shows it", () => {
    const config = {
      type: 'agent_config.updated',
      data: { blueprint: 'task-triage', base_url: 'https://llm.example.com/v1/key-in-path' },
    };
    const reader = urlView(levels({ webhooks: 'admin', agents: 'read' }));
    assert.deepEqual(reducePayloadUrls(config, reader, reducedUrl).data, {
      blueprint: 'task-triage',
      base_url: 'https://llm.example.com/…',
    });
    const agentsAdmin = urlView(levels({ webhooks: 'read', agents: 'admin' }));
    assert.deepEqual(reducePayloadUrls(config, agentsAdmin, reducedUrl), config);
  });
});
