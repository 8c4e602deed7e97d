/**
 * Calendar subscriptions through the gateway: a calendar's feed URL reads its iCalendar feed with
 * no Authorization header (what Google, Apple and Outlook calendars send), and nothing else; and
 * what an unknown field or query parameter is told.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import ICAL from 'ical.js';
import pg from 'pg';
import { captureLogs, eventually } from '@workauto/testing';
import { TIMESTAMP, assertError, fails, ok, startTestStack, type TenantFixture, type TestStack } from './harness.js';

const logs = captureLogs();

describe('calendar feed URLs through the gateway', () => {
  let stack: TestStack;
  let a: TenantFixture;
  let b: TenantFixture;
  /** Every feed URL handed out here: none may appear in a log line or in the calendar's database. */
  const issued: string[] = [];

  before(async () => {
    stack = await startTestStack();
    a = await stack.createTenant('Alpha');
    b = await stack.createTenant('Beta');
  });
  after(async () => {
    logs.stop();
    await stack?.stop();
  });

  /** Raw calls: the .ics feed (not JSON), and requests the document refuses (an unknown field or parameter). */
  const call = (method: string, path: string, key: string | undefined, body?: unknown) =>
    stack.api(method, `/api/v1${path}`, { ...(key ? { key } : {}), ...(body === undefined ? {} : { body }) });
  const byId = (id: string) => ({ params: { path: { id } } });

  async function calendar(key: string, name: string): Promise<string> {
    return (await ok(stack.client(key).POST('/api/v1/calendars', { body: { name, timezone: 'Europe/Berlin' } }), 201))
      .id;
  }

  async function feedUrl(key: string, id: string): Promise<string> {
    const res = await ok(stack.client(key).POST('/api/v1/calendars/{id}/feed-token', byId(id)), 201);
    assert.deepEqual(Object.keys(res).sort(), ['created_at', 'feed_url']);
    assert.match(res.created_at ?? '', TIMESTAMP);
    issued.push(res.feed_url);
    return res.feed_url;
  }

  /** A feed URL fetched as a calendar app does: a plain GET, no Authorization header. */
  const subscribe = (url: string) => fetch(url);
  const tokenOf = (url: string) => new URL(url).searchParams.get('token')!;
  const withToken = (id: string, token: string) =>
    `${stack.url}/api/v1/calendars/${id}/events.ics?token=${encodeURIComponent(token)}`;

  async function notFound(res: Response): Promise<string> {
    const text = await res.text();
    assert.equal(res.status, 404, text);
    const body = JSON.parse(text);
    assert.equal(body.error.status, 'NOT_FOUND');
    assert.equal(body.error.details[0].reason, 'CALENDAR_NOT_FOUND');
    return body.error.message as string;
  }

  it('serves a calendar by its feed URL without a credential, replaces and revokes it, and refuses anything else with 404', async () => {
    const api = stack.client(a.key);
    const team = await calendar(a.key, 'Team');
    const other = await calendar(a.key, 'Other');
    await ok(
      api.POST('/api/v1/events', {
        body: {
          calendar_id: team,
          title: 'Weekly sync',
          start_at: '2026-12-07T09:00:00Z',
          end_at: '2026-12-07T09:30:00Z',
          rrule: 'FREQ=WEEKLY;COUNT=4',
        },
      }),
      201,
    );

    const url = await feedUrl(a.key, team);
    assert.match(url, new RegExp(`^${stack.url}/api/v1/calendars/${team}/events\\.ics\\?token=wkcal_[0-9A-Za-z]{43}$`));
    const feed = await subscribe(url);
    const text = await feed.text();
    assert.equal(feed.status, 200, text);
    assert.equal(feed.headers.get('content-type'), 'text/calendar; charset=utf-8');
    const vevents = new ICAL.Component(ICAL.parse(text)).getAllSubcomponents('vevent');
    assert.deepEqual(
      vevents.map((v) => [v.getFirstPropertyValue('summary'), String(v.getFirstPropertyValue('rrule'))]),
      [['Weekly sync', 'FREQ=WEEKLY;COUNT=4']],
    );
    // The API key works as before, and gives the same feed.
    const byKey = await call('GET', `/calendars/${team}/events.ics`, a.key);
    assert.equal(byKey.status, 200);
    assert.equal(byKey.body, text);

    // Neither a key nor a token: 401, saying what to send.
    const anonymous = await call('GET', `/calendars/${team}/events.ics`, undefined);
    assertError(anonymous, 401, 'UNAUTHENTICATED');
    assert.match(anonymous.body.error.message, /Authorization: Bearer <key>.*token/);

    // Another calendar's id with this token, another calendar's token, a made-up token: the same 404,
    // as for a calendar that does not exist, so none of them confirms that the calendar exists.
    const token = tokenOf(url);
    const message = await notFound(await subscribe(withToken(other, token)));
    const otherUrl = await feedUrl(a.key, other);
    assert.equal((await subscribe(otherUrl)).status, 200);
    await notFound(await subscribe(withToken(team, tokenOf(otherUrl))));
    await notFound(await subscribe(withToken(team, `wkcal_${'x'.repeat(43)}`)));
    const missing = randomUUID();
    assert.equal(
      await notFound(await subscribe(withToken(missing, token))),
      message.replace(other, missing),
      'a calendar that exists and one that does not get the same answer',
    );
    assert.match(message, /feed URL.*ask the calendar's owner/);

    // A second POST replaces the token: the old URL stops at once, the new one works.
    const replaced = await feedUrl(a.key, team);
    assert.notEqual(replaced, url);
    await notFound(await subscribe(url));
    assert.equal((await subscribe(replaced)).status, 200);

    // DELETE revokes it (204, again 204 once there is none).
    await ok(api.DELETE('/api/v1/calendars/{id}/feed-token', byId(team)), 204);
    await notFound(await subscribe(replaced));
    await ok(api.DELETE('/api/v1/calendars/{id}/feed-token', byId(team)), 204);
    assert.equal((await subscribe(otherUrl)).status, 200, "revoking one calendar's URL leaves the others'");

    // Both changes are audited as calendar events, without the token.
    const entries = await eventually('the feed token events are in the audit log', async () => {
      const page = await ok(
        api.GET('/api/v1/audit-log', { params: { query: { resource_type: 'calendar', limit: 200 } } }),
      );
      const ofTeam = page.data.filter((e) => e.resource_id === team && e.action.startsWith('calendar.feed_token'));
      return ofTeam.some((e) => e.action === 'calendar.feed_token_revoked') ? ofTeam : undefined;
    });
    assert.deepEqual(
      entries.map((e) => [e.action, e.metadata?.replaced]),
      [
        ['calendar.feed_token_revoked', undefined],
        ['calendar.feed_token_created', true],
        ['calendar.feed_token_created', false],
      ],
    );
    const audited = JSON.stringify(entries);
    for (const u of [url, replaced]) assert.equal(audited.includes(tokenOf(u)), false, 'no token in the audit log');
  });

  it("keeps tenants apart: another tenant's key cannot make or revoke a URL, and its token never reads our calendars", async () => {
    const ours = await calendar(a.key, 'Ours');
    const theirs = await calendar(b.key, 'Theirs');
    const beta = stack.client(b.key);
    await fails(beta.POST('/api/v1/calendars/{id}/feed-token', byId(ours)), 404, 'CALENDAR_NOT_FOUND');
    await fails(beta.DELETE('/api/v1/calendars/{id}/feed-token', byId(ours)), 404, 'CALENDAR_NOT_FOUND');
    const theirUrl = await feedUrl(b.key, theirs);
    await notFound(await subscribe(withToken(ours, tokenOf(theirUrl))));
    // With our API key, their token does not open their calendar either.
    const mixed = await fetch(withToken(theirs, tokenOf(theirUrl)), { headers: { authorization: `Bearer ${a.key}` } });
    await notFound(mixed);
  });

  it("stores only the token's hash, and a deleted calendar's URL stops working", async () => {
    const gone = await calendar(a.key, 'Soon gone');
    const url = await feedUrl(a.key, gone);
    const db = new pg.Client({ connectionString: stack.databaseUrl('calendar') });
    await db.connect();
    try {
      const { rows } = await db.query('SELECT * FROM calendar_feed_tokens WHERE calendar_id = $1', [gone]);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].token_hash, createHash('sha256').update(tokenOf(url)).digest('hex'));
      assert.equal(JSON.stringify(rows).includes(tokenOf(url)), false, 'the token itself is not stored');
      await ok(stack.client(a.key).DELETE('/api/v1/calendars/{id}', byId(gone)), 204);
      await notFound(await subscribe(url));
      const left = await db.query('SELECT 1 FROM calendar_feed_tokens WHERE calendar_id = $1', [gone]);
      assert.equal(left.rowCount, 0, "the deleted calendar's token is deleted with it");
    } finally {
      await db.end();
    }
  });

  it('tells an unknown body field or query parameter the names it takes', async () => {
    const body = await call('POST', '/calendars', a.key, { display_name: 'Team', name: 'Team' });
    assertError(body, 400, 'INVALID_ARGUMENT');
    assert.equal(
      body.body.error.message,
      'display_name: is not a field of CreateCalendarRequest; its fields are name, description, timezone, color, metadata',
    );
    const query = await call(
      'GET',
      '/events?start=2026-01-01T00:00:00Z&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z',
      a.key,
    );
    assertError(query, 400, 'INVALID_ARGUMENT');
    const bad = query.body.error.details.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest'));
    assert.deepEqual(bad.field_violations, [
      {
        field: 'start',
        description:
          'is not a query parameter of GET /api/v1/events; its query parameters are limit, cursor, from, to, calendar_id',
      },
    ]);
  });

  it('never writes a feed URL or its token to a log line', () => {
    const text = logs.text();
    assert.ok(text.includes('"component":"calendar"') && text.includes('"msg":"request"'), 'the logs were captured');
    assert.ok(text.includes('"route":"/api/v1/calendars/{id}/events.ics"'), 'the feed requests were logged');
    assert.ok(issued.length >= 5);
    for (const url of issued) assert.equal(text.includes(tokenOf(url)), false, `${url.slice(0, 60)}… is in the logs`);
  });
});
