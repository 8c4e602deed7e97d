import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { S, failure, startCalendar, tenant, type Calendar } from './test-support.js';

const ORIGIN = 'https://api.example.com';

describe('calendar feed tokens over gRPC', () => {
  let cal: Calendar;
  before(async () => {
    cal = await startCalendar();
  });
  after(() => cal.stop());

  /** The whole feed as an anonymous caller (the gateway's token requests carry no principal). */
  async function read(
    id: string,
    token: string | undefined,
    call?: ReturnType<typeof tenant>['call'],
  ): Promise<string> {
    let text = '';
    for await (const chunk of cal.client.stream(
      S.streamCalendarFeed,
      { id, ...(token === undefined ? {} : { token }) },
      call,
    ))
      text += Buffer.from(chunk.data).toString();
    return text;
  }
  const tokenOf = (url: string) => new URL(url).searchParams.get('token')!;

  it('makes the feed URL from public_base_url, which a gRPC caller must send as an origin', async () => {
    const t = tenant();
    const c = await cal.client.call(S.createCalendar, { name: 'Team' }, t.call);
    for (const bad of ['', 'api.example.com', 'https://api.example.com/base', 'ftp://api.example.com']) {
      const err = await failure(cal.client.call(S.createCalendarFeedToken, { id: c.id, public_base_url: bad }, t.call));
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
      assert.deepEqual(
        err.fieldViolations.map((v) => v.field),
        ['public_base_url'],
        bad,
      );
    }
    const made = await cal.client.call(S.createCalendarFeedToken, { id: c.id, public_base_url: `${ORIGIN}/` }, t.call);
    assert.match(made.feed_url, new RegExp(`^${ORIGIN}/api/v1/calendars/${c.id}/events\\.ics\\?token=wkcal_\\w{43}$`));
    assert.match(await read(c.id, tokenOf(made.feed_url)), /^BEGIN:VCALENDAR\r\n[\s\S]*X-WR-CALNAME:Team\r\n/);
  });

  it('reads a feed without a tenant only by a current token; without either the call is refused', async () => {
    const t = tenant();
    const c = await cal.client.call(S.createCalendar, { name: 'Mine' }, t.call);
    const anonymous = await failure(read(c.id, undefined));
    assert.deepEqual([anonymous.code, anonymous.reason], [grpc.status.UNAUTHENTICATED, 'TENANT_REQUIRED']);
    const wrong = await failure(read(c.id, `wkcal_${'0'.repeat(43)}`));
    assert.deepEqual([wrong.code, wrong.reason], [grpc.status.NOT_FOUND, 'CALENDAR_NOT_FOUND']);
    const long = await failure(read(c.id, 'x'.repeat(10_000)));
    assert.equal(long.code, grpc.status.NOT_FOUND, 'an overlong token is no token, not a hash of 10,000 characters');
  });

  it('keeps one token per calendar under 20 concurrent creates: exactly one of them works', async () => {
    const t = tenant();
    const c = await cal.client.call(S.createCalendar, { name: 'Busy' }, t.call);
    const made = await Promise.all(
      Array.from({ length: 20 }, () =>
        cal.client.call(S.createCalendarFeedToken, { id: c.id, public_base_url: ORIGIN }, t.call),
      ),
    );
    const works = await Promise.all(
      made.map((m) =>
        read(c.id, tokenOf(m.feed_url)).then(
          () => true,
          () => false,
        ),
      ),
    );
    assert.equal(works.filter(Boolean).length, 1, 'one token, the others replaced');
    const { rows } = await cal.db.query('SELECT count(*)::int AS n FROM calendar_feed_tokens WHERE calendar_id = $1', [
      c.id,
    ]);
    assert.equal(rows[0].n, 1);
  });
});
